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

// maxControlFrame bounds a frame on the control pipe: a cancel or a stop.
const maxControlFrame = 4 << 10

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

// server is a sandbox worker's side of the protocol (wire.go). Its main goroutine reads the
// host's frames on stdin and runs each call itself, reading the replies it waits for as they
// come: one wake-up per frame. Cancel and stop frames come on the control pipe, read by a
// goroutine of its own, since the main goroutine does not read while the handler runs.
type server struct {
	w *sandbox.Worker

	progs     map[string]compiled // by digest
	progOrder []string            // oldest first
	progBytes int                 // JavaScript bytes of progs
	seq       uint64              // of the last rpc
	buf       []byte              // the last frame sent, encoded (only the main goroutine sends)

	mu     sync.Mutex
	loan   uint64                  // of the call in flight (sandbox.Proc.Loan); 0 between calls
	cancel context.CancelCauseFunc // of the call in flight; nil between calls
}

func newServer(w *sandbox.Worker) *server {
	return &server{w: w, progs: map[string]compiled{}}
}

// serve reads frames until the host closes the pipe; it returns the exit status.
func (s *server) serve() int {
	go s.control() // ends with the process
	if err := s.send(message{Op: opReady}); err != nil {
		return 1
	}
	for {
		m, err := s.read()
		if errors.Is(err, io.EOF) {
			return 0
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "sandbox worker:", err)
			return 1
		}
		if m.Op != opCall {
			fmt.Fprintln(os.Stderr, "sandbox worker: unexpected frame between calls:", m.Op)
			return 1
		}
		s.run(m.Loan, m.Call)
	}
}

// read reads and decodes the host's next frame on stdin.
func (s *server) read() (message, error) {
	b, err := s.w.Read(maxHostFrame)
	if err != nil {
		return message{}, err
	}
	return decodeMessage(b)
}

// await reads the frame the call waits for, of kind op; anything else means the host is gone
// or broken, and ends the process.
func (s *server) await(op string) message {
	m, err := s.read()
	switch {
	case errors.Is(err, io.EOF):
		os.Exit(0) // the host is gone
	case err != nil:
		fmt.Fprintln(os.Stderr, "sandbox worker:", err)
		os.Exit(1)
	case m.Op != op:
		fmt.Fprintf(os.Stderr, "sandbox worker: got a %q frame while waiting for %q\n", m.Op, op)
		os.Exit(1)
	}
	return m
}

// control reads the control pipe until it closes, interrupting the call a cancel or stop frame
// names.
func (s *server) control() {
	for {
		b, err := s.w.ReadControl(maxControlFrame)
		if err != nil {
			return // the host is gone: the main goroutine sees it too
		}
		m, err := decodeMessage(b)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sandbox worker: control:", err)
			os.Exit(1)
		}
		switch m.Op {
		case opCancel:
			s.interrupt(m.Loan, errCancelled)
		case opStop:
			s.interrupt(m.Loan, errStopped)
		default:
			fmt.Fprintln(os.Stderr, "sandbox worker: unknown control frame", m.Op)
			os.Exit(1)
		}
	}
}

// interrupt cancels the call in flight if it is the one of loan; a frame about an earlier
// call, which ended before the frame came, is moot.
func (s *server) interrupt(loan uint64, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil && s.loan == loan {
		s.cancel(cause)
	}
}

// run runs one call and sends its outcome.
func (s *server) run(loan uint64, spec *callSpec) {
	ctx, cancel := context.WithCancelCause(context.Background())
	s.mu.Lock()
	s.loan, s.cancel = loan, cancel
	s.mu.Unlock()
	var o *outcome
	if spec == nil {
		o = &outcome{Err: &wireError{Kind: errOther, Message: "sandbox worker: a call without its spec"}}
	} else {
		o = s.execute(ctx, spec)
	}
	s.mu.Lock()
	s.loan, s.cancel = 0, nil
	s.mu.Unlock()
	cancel(nil)
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
	m := s.await(opJS)
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
	s.buf = m.encode(s.buf[:0])
	err := s.w.Write(s.buf)
	if cap(s.buf) > maxKeptBuf { // a big result: do not keep its memory between calls
		s.buf = nil
	}
	return err
}

// maxKeptBuf bounds the encoding buffer a worker keeps between frames.
const maxKeptBuf = 64 << 10

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
	r := s.await(opReply)
	if r.Seq != m.Seq {
		fmt.Fprintf(os.Stderr, "sandbox worker: the reply to rpc %d came for %d\n", m.Seq, r.Seq)
		os.Exit(1)
	}
	return r
}
