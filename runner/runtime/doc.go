// Package runtime is the HTTP server of one deployed agent: chat over SSE, synchronous chat,
// the AI SDK UI message stream, sessions, runtime auth and tenancy (spec §4.2–4.6), and the
// system routes. The same Runtime serves `svc dev DIR` and every deployment behind the router.
//
// It is the hot path of the product, so it uses net/http's ServeMux rather than gin, encodes
// frames with the append-based encoder of package sse, and keeps per-session state small: a
// live session is the stored record plus a lock and a queue while a turn runs. Live sessions
// are evicted after the idle timeout and reloaded from the session store on their next request.
//
// A chat request is: authenticate, decode and validate the body, resolve the session (the
// ownership and scope rules of §4.6 decide between resume and a fresh session), take its turn
// lock (409 turn_in_progress), then hand it to package turn, which stores the user's message,
// runs the loop with the request's context as cancellation (a client that leaves cancels the
// turn: user_abort) and stores the result with a context that outlives the request. This
// package turns the frames into SSE, the /chat/sync answer or the AI SDK stream, and a turn's
// refusals (*turn.Error) into its error codes.
package runtime
