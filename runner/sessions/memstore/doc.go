// Package memstore keeps sessions in process memory, for `svc dev`: nothing survives a
// restart (spec §3.3 allows that for local development). It also holds Locks, the in-process
// turn lock every runtime uses unless a shared one is configured.
package memstore
