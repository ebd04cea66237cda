// Package faults kills the process at named points of its work, for the fault harness of the
// tests (cmd/svc/fault_test.go): a process started with SVC_FAULT=NAME dies with SIGKILL the
// first time it passes faults.Point(NAME), and with SVC_FAULT=NAME:N the N-th time. SVC_FAULT is
// a testing-only setting; unset (always, in production) a point costs one string comparison.
//
// The points: build.fetch (a build's fetch has started), build.upload (the bundle is packed,
// not yet uploaded), build.upload.body (in the middle of the bundle's upload: the object store
// has read more than half of the bundle, and sent what it read; see Reader. The pack before it
// is done in memory, so a death while packing leaves no more behind than one at build.upload),
// build.activate (the build is done, its deployment not yet recorded and activated),
// chat.stream (a text delta of a streaming turn was sent), automation.claim (a scheduler claimed
// an automation's fire, its task not yet enqueued), automation.run (an automation's run has its
// session, its turn not yet run), promote.copy (a promotion checks and
// shares the bundle object, before the new deployment is recorded).
package faults

import (
	"io"
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

// Reader returns r when SVC_FAULT does not name the point name (always, in production: r itself,
// so nothing changes), and otherwise a reader of r that passes Point(name) once, at the first Read
// after more than half of size bytes were read: a point in the middle of whatever consumes r,
// such as an upload that sends the bytes as it reads them.
func Reader(name string, r io.Reader, size int64) io.Reader {
	if armed == "" || armed != name {
		return r
	}
	return &halfReader{name: name, r: r, half: size / 2}
}

// halfReader passes its point once more than half bytes were read.
type halfReader struct {
	name       string
	r          io.Reader
	half, read int64
	passed     bool
}

func (h *halfReader) Read(p []byte) (int, error) {
	if !h.passed && h.read > h.half {
		h.passed = true
		Point(h.name)
	}
	n, err := h.r.Read(p)
	h.read += int64(n)
	return n, err
}
