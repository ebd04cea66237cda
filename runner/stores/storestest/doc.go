// Package storestest is the conformance suite every stores.Backend passes (STYLE 31): the
// in-memory backend and the SQL backend on SQLite and Postgres, in the platform database and
// in a database of its own, run the same tests through stores.Records, so that the rules of
// history, queries, deletes, concurrent writes, isolation and traces are the same everywhere.
package storestest
