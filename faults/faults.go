// Package faults kills the process at named points of its work, for the fault harness of the
// tests (cmd/svc/fault_test.go): a process started with SVC_FAULT=NAME dies with SIGKILL the
// first time it passes faults.Point(NAME), and with SVC_FAULT=NAME:N the N-th time. SVC_FAULT is
// a testing-only setting; unset (always, in production) a point costs one string comparison.
//
// The points: build.fetch (a build's fetch has started), build.upload (the bundle is packed,
// not yet uploaded), build.activate (the build is done, its deployment not yet recorded and
// activated), chat.stream (a text delta of a streaming turn was sent), promote.copy (a
// promotion checks and shares the bundle object, before the new deployment is recorded).
package faults

import (
	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

// Env is the environment variable that arms a point.
const Env = "SVC_FAULT"

var (
	armed, nth = parse(os.Getenv(Env))
	passes     atomic.Int64
)

// parse reads NAME or NAME:N (N >= 1; a bad N counts as 1).
func parse(v string) (string, int64) {
	name, count, ok := strings.Cut(v, ":")
	if !ok {
		return v, 1
	}
	n, err := strconv.ParseInt(count, 10, 64)
	if err != nil || n < 1 {
		n = 1
	}
	return name, n
}

// Point kills the process when SVC_FAULT names this point and this is the pass it names.
func Point(name string) {
	if armed == "" || armed != name {
		return
	}
	if passes.Add(1) == nth {
		die()
	}
}
