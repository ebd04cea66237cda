// Package evals runs an agent's evals (evals/<eval>.md) against a deployment and grades them.
//
// Run sends each eval's query to a fresh session through an injected ChatFunc (the runtime
// implements it; evals knows nothing of HTTP or sessions), with the eval's "Context:" line as the
// request context and the metadata {"source": "eval"}. Each eval runs Params.Runs times and
// passes when every assertion passes in every run: models are not deterministic, and an eval
// that passes one time in two is a failing eval.
//
// Assertions are graded in two ways. The ones that say what the agent must do (which tool,
// connection, store, skill or knowledge document it uses, how the turn ends) are checked from
// the transcript by rules, because a transcript answers them exactly and a model would only
// guess. The rest ("Should say that the refund is possible in full") go to a judge model, one
// request per run for all of that run's judged assertions.
//
// # Rules
//
// An assertion starts with "Should" or "Must"; "Should not", "Should never", "Must not" and
// "Must never" (or agent.Assertion.Negative) invert it. After that prefix, the text, matched
// case-insensitively without a final period, is one of these (X is a name, bare or in `back
// quotes` or quotes):
//
//	| Phrase (after the prefix)                                       | Holds when the turn has                                                                                    |
//	|-----------------------------------------------------------------|------------------------------------------------------------------------------------------------------------|
//	| load, activate or use [the] X skill                             | a skill_activated frame for X, or a load_skill call with name X                                            |
//	| load or activate [the] skill X                                  | (same)                                                                                                     |
//	| load, read, consult or use [the] X knowledge [document]         | a load_knowledge call with name X                                                                          |
//	| load, read or consult [the] knowledge [document] X              | (same)                                                                                                     |
//	| call, use or invoke [the] X tool (or connection, store)         | a call of tool X, of a store tool store__X__<action>, or of the request tool with connection X             |
//	| call or invoke [the] tool (or connection) X                     | (same)                                                                                                     |
//	| call or invoke X                                                | (same)                                                                                                     |
//	| use `X` (quoted), or use X when X holds an underscore           | (same)                                                                                                     |
//	| read, fetch or query [from] [the] X [store, connection]         | a request call with connection X, or store__X__get, store__X__query or store__X__history                   |
//	| write, save or record to (in, into) [the] X [store, connection] | store__X__set or store__X__delete, or a request call with connection X and a method other than GET or HEAD |
//	| write or update [the] X store                                   | (same)                                                                                                     |
//	| end, finish or stop with [the] [reason] X [reason]              | a done frame with reason X ("max turns" reads as max_turns)                                                |
//
// "[...]" is optional; "doc" may stand for "document" and "api" for "connection" at the end.
// A call counts whatever its result. Store names match with hyphens read as underscores, as in
// the store tools' names. Any other assertion goes to the judge.
//
// # Judge
//
// The judge gets the query, the tool calls (name, parameters, status, result or error, each
// clipped), the skills loaded, the done reason, the answer text and the numbered assertions, and
// must answer one JSON object {"verdicts": [{"index": 1, "pass": true, "reason": "..."}]}.
// models.Request has no structured-output option, so the shape is asked for in the prompt and
// the answer is parsed strictly: an answer that is not that object, with an index out of range or
// given twice, makes every judged assertion of the run an error; a missing index or a pass that
// is not a boolean makes that assertion an error. An error is never a pass. The judge's verdict
// is about the assertion as written: a "Should NOT" text is not inverted again.
//
// # Outcome
//
// An assertion, a run and an eval are pass, fail or error. A run or eval fails when an assertion
// failed; it is an error when none failed and one could not be graded (the chat did not run, the
// judge call failed, the verdict was malformed, no judge is configured). Result.State, the state
// of the commit status, is failure when any eval failed, else error when any eval errored, else
// success: a real failure outranks an infrastructure error, so an error state never hides one.
//
// # An agent's evals
//
// RunAgent is the eval policy of a deployment's run: every eval of the agent, in the order of
// their names, judged by the configured judge model, else the agent's main model, else the
// platform's default; its state and Result as JSON are the record of the eval run. Which
// deployments' evals run, and where their statuses go, is deploy.Evals's.
package evals
