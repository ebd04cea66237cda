// Package objectstest is the conformance suite of registry.Objects: every
// implementation runs Run (and Bench) against fresh stores of its own, as
// distribution's storage driver testsuites do.
//
// The contract on registry.Objects (atomic Put, independent Copy,
// ErrNotFound, sorted List, key rules, ctx) is written once and tested
// here once, so the filesystem store used by `svc up` and the S3 store used
// in production cannot drift apart: a behaviour the suite does not pin
// down is one that callers must not rely on.
package objectstest
