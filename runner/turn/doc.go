// Package turn runs one chat turn of an agent: open (acquire the session: lock, load, refresh,
// create, under the tenancy rules of spec 4.6), begin (admit the message against the storage
// bounds, read the history the model sees, store the attachments and the user's entry), run
// (loop.Run against a Sink) and finish (record the result on the session, store it, release the
// turn lock). It is where tools, approvals and durable starts plug into a turn, and the one place
// that acquires sessions: every way into a turn (chat and its streams, queued messages,
// automations, channels, MCP) calls Engine.Open with the caller's access.Identity, and the session routes call Get,
// Prepare, Queue, Update and Delete, so that a session another caller may not see is hidden the
// same way everywhere. It knows nothing of HTTP: package runtime decodes requests and hands the
// frames to its SSE, sync or AI SDK sink.
//
// An Engine holds what every turn of one runtime shares: the live-session cache, the session
// store and blobs, the storage bounds, the prompt Profiles and the model factory.
//
// Lock order: a session is locked before it is read: Open takes the session's turn Lock (one turn
// per session, shared between runtimes through the Locker) and only then loads or refreshes it
// (live.Cache.Latest: over a shared store the stored session wins over a copy live here), and
// the turn holds the Lock for its whole life; Update and Delete take it for their change. Then
// come the locks of package live (its Cache's, a session's save lock, the session's mutex). The
// live session's mutex is held only for short reads and writes of the record, never across a
// store call, a model call or a Sink.
// A Lock that is lost while the turn runs (a shared lock that could not be renewed) cancels the
// turn's context with ErrLockLost: the turn stops, stores nothing, and the session is dropped
// from the cache so that the next request reads it from the store again.
package turn
