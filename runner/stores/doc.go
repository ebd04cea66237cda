// Package stores keeps the records of an agent's stores (svc/stores/<store>.json): typed
// records with a key rendered from the entity's key template, a version per write, a bounded
// history and, on request, a trace of who wrote each version.
//
// Records is the one way in. It checks every input against the store's entity (field types,
// enum values, unknown fields, the key's fields, sizes and query limits), with errors that name
// the field, and applies each store's history.versions and trace settings; a Backend only
// keeps what it is given, so every backend follows the same rules. The conformance suite in
// storestest holds them to it.
//
// # Backends
//
// Memory keeps records in a map (svc dev, tests). SQL keeps them in two tables, store_records
// (the current version of each key) and store_versions (the earlier ones), in SQLite or
// Postgres, with an agent_id column so that agents can share a database: the platform database
// (migration 00008) or a database of the agent's own named by svc.json "stores.url". Open
// creates the tables in the latter with the same versioned SQL, embedded under schema/ and run
// by goose with a version table of its own (svc_stores_goose_version), rather than with an
// ad-hoc AutoMigrate: both databases get the same tables, and a later change is a numbered file
// in both places. A test keeps the two copies equal.
//
// The backends live in this package, not in sub-packages per backend, so that Open can choose
// one with a switch (STYLE 10) without an import cycle.
package stores
