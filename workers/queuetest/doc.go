// Package queuetest is the conformance suite of workers.Queue: every implementation runs Run (and
// Benchmark) against fresh backends of its own, so that the Redis queue of the scale-out roles and
// the database queue of `svc up` cannot drift apart. A behaviour the suite does not pin down is
// one callers must not rely on.
//
// The crash test is real: it starts a worker in a child process (the test binary itself, re-run
// with -test.run=^TestHelperProcess$), lets it start a task, kills it with SIGKILL, and checks
// that a second worker runs the task to completion exactly once more. Each implementation's test
// package therefore declares
//
//	func TestHelperProcess(t *testing.T) { queuetest.HelperProcess(t, harness.Open) }
//
// which does nothing unless the suite started it.
//
// Waiting in the suite is for events (a handler ran, a handler was told of a failure), bounded only by a generous
// limit that turns a hang into a failure; no assertion depends on speed. The one exception is
// documented where it is: the graceful-stop test pauses briefly to give a broken Run the chance
// to return early.
package queuetest
