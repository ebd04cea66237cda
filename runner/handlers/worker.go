package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/dop251/goja"

	"svc/runner/sandbox"
)

// ServeSandbox serves handler calls and exits when this process was started as a sandbox
// worker (sandbox.IsWorker); otherwise it returns at once. The main of every binary whose
// runtimes run handlers calls it first: cmd/svc's, and the TestMain of test packages that run
// handlers.
func ServeSandbox() {
	if !sandbox.IsWorker() {
		return
	}
	w, err := sandbox.NewWorker()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(newServer(w).serve())
}

// maxHostFrame bounds a frame from the host: a call's arguments, journal and attachments.
const maxHostFrame = 256 << 20

// Programs a worker keeps compiled, at most.
const (
	maxPrograms     = 64
	maxProgramBytes = 32 << 20
)

// errCancelled and errStopped interrupt a call the host cancelled or stopped.
var (
	errCancelled = errors.New("handlers: cancelled by the host")
	errStopped   = errors.New("handlers: stopped by the host")
)

// server is a sandbox worker's side of the protocol (wire.go): it runs one call at a time on
// a goroutine of its own while its main goroutine reads what the host sends.
type server struct {
	w *sandbox.Worker

	progs     map[string]compiled // by digest
	progOrder []string            // oldest first
	progBytes int                 // JavaScript bytes of progs

	replies chan message // the reply to the one rpc in flight
	js      chan message // the JavaScript the call waits for

	mu       sync.Mutex
	cancel   context.CancelCauseFunc // of the call in flight; nil between calls
	finished chan struct{}           // closed when the last call's goroutine returned
	seq      uint64
}

func newServer(w *sandbox.Worker) *server {
	done := make(chan struct{})
	close(done)
	return &server{w: w, progs: map[string]compiled{},
		replies: make(chan message, 1), js: make(chan message, 1), finished: done}
}

// serve reads frames until the host closes the pipe; it returns the exit status.
func (s *server) serve() int {
	if err := s.send(message{Op: opReady}); err != nil {
		return 1
	}
	for {
		b, err := s.w.Read(maxHostFrame)
		if errors.Is(err, io.EOF) {
			return 0
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "sandbox worker: read:", err)
			return 1
		}
		var m message
		if err := json.Unmarshal(b, &m); err != nil {
			fmt.Fprintln(os.Stderr, "sandbox worker: bad frame:", err)
			return 1
		}
		switch m.Op {
		case opCall:
			<-s.finished // the last call's goroutine is gone
			ctx, cancel := context.WithCancelCause(context.Background())
			finished := make(chan struct{})
			s.mu.Lock()
			s.cancel, s.finished = cancel, finished
			s.mu.Unlock()
			go s.run(ctx, m.Call, finished)
		case opJS:
			s.js <- m
		case opReply:
			s.replies <- m
		case opCancel:
			s.interrupt(errCancelled)
		case opStop:
			s.interrupt(errStopped)
		default:
			fmt.Fprintln(os.Stderr, "sandbox worker: unknown frame", m.Op)
			return 1
		}
	}
}

// interrupt cancels the call in flight, if any.
func (s *server) interrupt(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		s.cancel(cause)
	}
}

// run runs one call and sends its outcome.
func (s *server) run(ctx context.Context, spec *callSpec, finished chan struct{}) {
	defer close(finished)
	var o *outcome
	if spec == nil {
		o = &outcome{Err: &wireError{Kind: errOther, Message: "sandbox worker: a call without its spec"}}
	} else {
		o = s.execute(ctx, spec)
	}
	s.mu.Lock()
	s.cancel(nil)
	s.cancel = nil
	s.mu.Unlock()
	if err := s.send(message{Op: opDone, Outcome: o}); err != nil {
		os.Exit(1) // the host is gone
	}
}

// execute runs spec in a fresh runtime, watching its memory.
func (s *server) execute(ctx context.Context, spec *callSpec) *outcome {
	prg, err := s.program(spec)
	if err != nil {
		return &outcome{Err: &wireError{Kind: errOther, Message: err.Error()}}
	}
	end := s.w.Begin()
	defer end()
	return (&engine{spec: spec, prg: prg}).run(ctx, goja.New(), s)
}

// program returns the compiled program of spec, asking the host for its JavaScript when this
// worker has not compiled it yet.
func (s *server) program(spec *callSpec) (*goja.Program, error) {
	if c, ok := s.progs[spec.Digest]; ok {
		return c.prg, nil
	}
	if err := s.send(message{Op: opNeed, Digest: spec.Digest}); err != nil {
		return nil, err
	}
	m := <-s.js
	prg, err := compile(spec.Tool, m.JS)
	if err != nil {
		return nil, err
	}
	s.progs[spec.Digest] = compiled{prg, len(m.JS)}
	s.progOrder = append(s.progOrder, spec.Digest)
	s.progBytes += len(m.JS)
	for len(s.progOrder) > 1 && (len(s.progOrder) > maxPrograms || s.progBytes > maxProgramBytes) {
		old := s.progOrder[0]
		s.progOrder = s.progOrder[1:]
		s.progBytes -= s.progs[old].bytes
		delete(s.progs, old)
	}
	return prg, nil
}

// compiled is a program a worker keeps, with the size of its JavaScript.
type compiled struct {
	prg   *goja.Program
	bytes int
}

func (s *server) send(m message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return s.w.Write(b)
}

// emit implements outside.
func (s *server) emit(f *emitFrame) {
	_ = s.send(message{Op: opEmit, Frame: f}) // a lost host ends the process at the outcome
}

// record implements outside.
func (s *server) record(key string, value json.RawMessage) {
	_ = s.send(message{Op: opRecord, Key: key, Value: value})
}

// rpc implements outside: the host answers every rpc, or kills the worker.
func (s *server) rpc(m message) message {
	s.seq++
	m.Op, m.Seq = opRPC, s.seq
	if err := s.send(m); err != nil {
		os.Exit(1) // the host is gone
	}
	for {
		r := <-s.replies
		if r.Seq == m.Seq {
			return r
		}
	}
}
