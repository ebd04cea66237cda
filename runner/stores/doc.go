// Package stores keeps the records of an agent's stores (svc/stores/<store>.json): typed
// records with a key rendered from the entity's key template, a version per write, a bounded
// history and, on request, a trace of who wrote each version; and it makes the store tools
// store__<store>__get|set|query|delete|history that a model calls.
//
// Records is the one way in. It checks every input against the store's entity (field types,
// enum values, unknown fields, the key's fields, sizes and query limits), with errors that name
// the field, and applies each store's history.versions and trace settings; a Backend only
// keeps what it is given, so every backend follows the same rules. The conformance suite in
// storestest holds them to it.
//
// Decisions the spec leaves open: set takes the entity's fields with only the key's fields
// required, and replaces the whole record (a field left out is not kept; null is refused
// rather than read as "absent"). A delete removes the record and its earlier versions, and a
// later set of the key starts again at version 1. A query's where compares string, integer,
// number, boolean and enum fields by equality (numbers by value); object and array fields are
// refused there. Traces (session id, tool call id; the time is the version's UpdatedAt) ride on
// the versions, so they are kept as long as the version is and read with Records.History.
//
// # Backends
//
// Memory keeps records in a map (svc dev, tests). SQL keeps them in two tables, store_records
// (the current version of each key) and store_versions (the earlier ones), in SQLite or
// Postgres, with an agent_id column so that agents can share a database: the platform database
// (migration 00009) or a database of the agent's own named by svc.json "stores.url". Open
// creates the tables in the latter with the same files, the platform migrations whose names end
// in _stores.sql, run by goose with a version table of its own (svc_stores_goose_version),
// rather than with an ad-hoc AutoMigrate: both databases get the same tables from one copy of
// the SQL, and a later change to them is one new migration named *_stores.sql.
//
// A database of the agent's own is opened at the first use of the stores, not when the
// runtime starts (lazy.go): an env: reference that is not set yet, or a database that is down,
// fails the store tools and routes with ErrUnavailable (saying which variable and how to set
// it) while the rest of the agent works, and the next use tries again, so that a secret set
// later applies without a rebuild or a restart.
//
// The backends live in this package, not in sub-packages per backend, so that Open can choose
// one with a switch (STYLE 10) without an import cycle.
//
// # Wiring, for the runtime
//
// Once per runtime of an agent (a deployment's bundle, or svc dev's folder):
//
//	backend, err := stores.Open(ctx, stores.OpenParams{
//		Config:   ag.Config.Stores, // svc.json "stores": {"backend": "memory"|"sqlite"|"postgres", "url": "env:VAR"}
//		AgentID:  agentID,          // the platform agent; "" under svc dev
//		Env:      env,              // resolves env: names: the agent's secrets, then the environment
//		Hint:     hint,             // how to set a variable that is not set (svc secrets set ...)
//		Platform: db,               // the platform database; nil under svc dev
//	})
//	defer backend.Close()
//	recs, err := stores.New(stores.Params{Stores: ag.Stores, Backend: backend})
//
// svc dev keeps stores in memory (CONTRACT §1): it passes Platform nil and a Config of
// &agent.StoresConfig{Backend: agent.BackendMemory}. Records of one agent are shared by all
// its deployments in a database; memory is per runtime.
//
// Per named agent, where tools.ForAgent lists stores as omitted today: add
// stores.Tools(recs, named.Stores) to the set (access "r" gives get, query and history, "rw"
// all five). A runtime that offers only the store tools agent.json "tools" lists splits each
// name with agent.ParseStoreToolName, checks the action against stores.Actions of the access
// mode, and calls stores.NewTool. What the unscoped default chat (no named agent) may reach
// is the runtime's choice, as for skills and knowledge.
//
// Per run: the loop hands each call its session (tools.Call.Session), so that a write to a
// store with "trace": true records the session as well as the tool call id.
//
// The store routes (runtime auth, not partitioned by scope) map onto Records:
//
//	GET    /stores/{store}?limit=  recs.Query(ctx, store, stores.Query{Limit: n})  {"items": stores.Items(recs)}
//	GET    /stores/{store}/{key}   recs.Get                                        stores.ItemOf(rec)
//	PUT    /stores/{store}/{key}   recs.Put(ctx, store, key, body, stores.Trace{}) stores.ItemOf(rec)
//	DELETE /stores/{store}/{key}   recs.Delete                                     {"key", "deleted"}
//
// ErrUnknownStore and ErrNotFound are 404 NOT_FOUND; ErrInvalid is 400 INVALID_REQUEST with
// the error's text (a *FieldError names the field: "key", "limit", a field of the entity);
// ErrUnavailable is 503 with the error's text; anything else is a server error.
package stores
