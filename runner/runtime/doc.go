// Package runtime is the HTTP server of one deployed agent: chat over SSE, synchronous chat,
// the AI SDK UI message stream, the session routes, runtime auth (spec §4.2–4.6), and the
// system routes. The same Runtime serves `svc dev DIR` and every deployment behind the router.
//
// It is the hot path of the product, so it uses net/http's ServeMux rather than gin, encodes
// frames with the append-based encoder of package sse, and keeps per-session state small: a
// live session is the stored record plus a lock and a queue while a turn runs. Live sessions
// are evicted after the idle timeout and reloaded from the session store on their next request.
//
// A chat request is: authenticate, decode and validate the body, then turn.Engine.Open, which
// acquires the session (its turn lock first, 409 turn_in_progress; the ownership and scope rules
// of §4.6 decide between resume and a fresh session), stores the user's message, and runs the
// loop with the request's context as cancellation (a client that leaves cancels the turn:
// user_abort), storing the result with a context that outlives the request. The session routes
// call the Engine's Get, Prepare, Queue, Update and Delete under the same rules. This package
// turns the frames into SSE, the /chat/sync answer or the AI SDK stream, and a refusal
// (*turn.Error) into its error code.
//
// The messaging channels (channels.go) are the one entry point that does not answer in its
// request: the route verifies, dedupes and enqueues, and RunChannel, called by a queue task on
// whichever process takes it, runs the turn and sends the reply. Replies go through an outbox
// drained by one send task per reply (not one per row), because the parts of a split answer must
// arrive in their order: a part that waits (a 429, a backoff) holds back those after it, which one
// task per row could not promise.
package runtime
