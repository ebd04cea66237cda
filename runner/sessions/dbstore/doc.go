// Package dbstore keeps sessions in the platform database (SQLite or Postgres, tables of
// migration 00003), so that a session survives a runtime restart and can be served by any
// runner.
package dbstore
