// Package runtime is the HTTP server of one deployed agent: chat over SSE, synchronous chat,
// the AI SDK UI message stream, sessions, runtime auth and tenancy (spec §4.2–4.6), and the
// system routes. The same Runtime serves `svc dev DIR` and every deployment behind the router.
//
// It is the hot path of the product, so it uses net/http's ServeMux rather than gin, encodes
// frames with the append-based encoder of package sse, and keeps per-session state small: a
// live session is the stored record plus a lock and a queue while a turn runs. Live sessions
// are evicted after the idle timeout and reloaded from the session store on their next request.
//
// A turn is: resolve the session (ownership and scope rules of §4.6 decide between resume,
// fresh session and 404), take the per-session turn lock (409 turn_in_progress), store the
// user's message, run package loop with the request's context as cancellation (a client that
// leaves cancels the turn: user_abort), store the result with a context that outlives the
// request, then send done.
package runtime
