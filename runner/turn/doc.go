// Package turn runs one chat turn of an agent: begin (admit the message against the storage
// bounds, read the history the model sees, store the attachments and the user's entry), run
// (loop.Run against a Sink) and finish (record the result on the session, store it, release the
// turn lock). It is where tools, approvals and durable starts plug into a turn; it knows
// nothing of HTTP: package runtime decodes requests, resolves their session under the tenancy
// rules, takes its Lock through the Engine, and hands the frames to its SSE, sync or AI SDK sink.
//
// An Engine holds what every turn of one runtime shares: the live-session cache, the session
// store and blobs, the storage bounds, the prompt Profiles and the model factory.
//
// Lock order: a turn holds its session's turn Lock (one turn per session, shared between
// runtimes through the Locker) for its whole life; it takes the live session's mutex only for
// short reads and writes of the record, never across a store call, a model call or a Sink.
// A Lock that is lost while the turn runs (a shared lock that could not be renewed) cancels the
// turn's context with ErrLockLost: the turn stops, stores nothing, and the session is dropped
// from the cache so that the next request reads it from the store again.
package turn
