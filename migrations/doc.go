// Package migrations owns the database schema of svc: versioned SQL files (goose), one set per
// dialect, embedded in the binary, and the one place that opens a database.
//
// Both dialects carry the same tables and the same meaning. Postgres is the database of the
// scale-out roles (svc api, worker, runner); SQLite (pure Go, no cgo) is the embedded default of
// svc up and of svc dev. A file that has landed is never edited: a change is the next file.
package migrations
