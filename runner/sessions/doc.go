// Package sessions owns the chat session record (spec §2.7, §3.3) and the interfaces the runtime
// keeps it behind: a Store for the record and its history, and a Locker that lets one turn at a
// time run per session.
//
// Two stores exist because the two ways of running an agent need different things: `svc dev`
// keeps sessions in memory (memstore) and loses them on restart, as the spec allows for local
// development; the platform keeps them in its database (dbstore) so that a session survives a
// runtime restart, a redeploy and a move to another runner. Both pass the same conformance
// suite (sessionstest). The history is append-only: a turn adds messages, and compaction keeps
// its summary in the session's State instead of rewriting what was said.
package sessions
