// Package clienttest provides an in-memory fake of the svc platform API and of the agent runtimes
// behind it, for tests of clients (the client package and the svc client commands).
//
// It fakes the *external* side of the client: the HTTP contract of CONTRACT §3 and spec §4.2, with
// just enough state (agents, deployments, builds, source versions, runtime tokens) for a client to
// walk through deploy, promote, rollback and chat. It is not the platform: the real server's own
// tests run against the real implementation.
package clienttest
