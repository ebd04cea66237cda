// Package loop runs the agent loop of one chat turn: model call, tool calls, model call again,
// until the model stops, a limit is hit or the client goes away (spec §6.3).
//
// It knows nothing about HTTP or storage. It takes the conversation as model messages, streams
// frames to a Sink, and returns the new messages and why it stopped; the runtime persists them.
// Context management (spec §8) lives here too because it decides what each model call sees:
// old tool results are cleared to markers by recency, and past 90% of the context window the
// older turns are summarised with the session's model. Both only change the view sent to the
// model, never the stored history.
package loop
