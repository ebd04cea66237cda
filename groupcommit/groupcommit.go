// Package groupcommit runs the concurrent calls of a function together, in batches: a group
// commit. A call that comes while no batch runs starts one at once; calls that come while a
// batch runs wait, and the first of them runs the next batch with every call that came
// meanwhile. Every call is answered by a batch that started after it came, so a batch may
// stand for a fresh read as well as a write. No goroutine is started: a batch runs on the
// goroutine of one of its callers.
package groupcommit

import "sync"

// Group batches the calls of Do to Run. The zero value is not usable: set Run.
type Group[In, Out any] struct {
	// Run does the work of one batch and returns the output of each input, in order. An error
	// is every call's error. Run is never called twice at once.
	Run func(ins []In) ([]Out, error)
	// Max bounds the calls of a batch; 0 means no bound. The calls past it wait for the next.
	Max int

	mu      sync.Mutex
	busy    bool // a batch runs
	pending []*call[In, Out]
}

// call is one call of Do waiting for its batch.
type call[In, Out any] struct {
	in  In
	out Out
	err error
	// wake receives nil once the call is answered, or the next batch, this call first, for
	// its goroutine to run.
	wake chan []*call[In, Out]
}

// Do runs in in a batch that starts after this call and returns its output.
func (g *Group[In, Out]) Do(in In) (Out, error) {
	c := &call[In, Out]{in: in, wake: make(chan []*call[In, Out], 1)}
	batch := []*call[In, Out]{c}
	g.mu.Lock()
	if g.busy {
		g.pending = append(g.pending, c)
		g.mu.Unlock()
		batch = <-c.wake
	} else {
		g.busy = true
		g.mu.Unlock()
	}
	if batch != nil {
		g.run(batch)
	}
	return c.out, c.err
}

// run runs batch, hands the calls that came meanwhile to the first of them, then answers the
// others of batch.
func (g *Group[In, Out]) run(batch []*call[In, Out]) {
	ins := make([]In, len(batch))
	for i, c := range batch {
		ins[i] = c.in
	}
	outs, err := g.Run(ins)
	for i, c := range batch {
		if err != nil {
			c.err = err
		} else if i < len(outs) {
			c.out = outs[i]
		}
	}
	g.mu.Lock()
	n := len(g.pending)
	if g.Max > 0 {
		n = min(n, g.Max)
	}
	next := g.pending[:n:n]
	g.pending = g.pending[n:]
	if len(g.pending) == 0 {
		g.pending = nil
	}
	g.busy = n > 0
	g.mu.Unlock()
	if n > 0 {
		next[0].wake <- next
	}
	for _, c := range batch[1:] {
		c.wake <- nil
	}
}
