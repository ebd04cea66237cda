// Package dbstore keeps sessions in the platform database (SQLite or Postgres, tables of
// migration 00003), so that a session survives a runtime restart and can be served by any
// runner. The sessions and runs tables are described once, by registry's rows
// (registry.SessionRow, registry.RunRow), since the platform lists them too; the history
// (session_messages) is this package's alone.
package dbstore
