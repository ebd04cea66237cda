// Package stores keeps the records of an agent's stores (svc/stores/<store>.json): typed
// records with a key rendered from the entity's key template, a version per write, a bounded
// history and, on request, a trace of who wrote each version.
//
// Records is the one way in. It checks every input against the store's entity (field types,
// enum values, unknown fields, the key's fields, sizes and query limits), with errors that name
// the field, and applies each store's history.versions and trace settings; a Backend only
// keeps what it is given, so every backend follows the same rules. The conformance suite in
// storestest holds them to it.
package stores
