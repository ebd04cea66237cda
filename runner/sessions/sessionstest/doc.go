// Package sessionstest is the conformance suite every sessions.Store passes (STYLE 31): the
// in-memory store and the database store on SQLite and Postgres run the same tests.
package sessionstest
