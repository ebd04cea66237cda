package runtime

import (
	"context"
	"errors"
	"sync"
	"time"

	"svc/runner/connections"
)

// connCheckEvery is how often the runtime calls each connection's testPath for /health.
const connCheckEvery = 5 * time.Minute

// connState is a connection's state on /health.
type connState struct {
	Status    string    `json:"status"` // ok | error | unchecked (no testPath, or not checked yet)
	Error     string    `json:"error,omitempty"`
	CheckedAt time.Time `json:"checked_at,omitzero"`
	// MCP is the state of an mcp connection: initialize and tools/list succeeded, the tools
	// offered, the tools left out (warnings); nil for a REST connection.
	MCP *connections.MCPStatus `json:"mcp,omitempty"`
}

// connHealth keeps the last check of each connection.
type connHealth struct {
	mu    sync.Mutex
	state map[string]connState
}

func (h *connHealth) snapshot() map[string]connState {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]connState, len(h.state))
	for k, v := range h.state {
		out[k] = v
	}
	return out
}

// checkConnections calls every connection's testPath (an mcp connection: initialize when its
// session is closed, and tools/list) now and then every connCheckEvery, until
// Close. A failing connection is reported on /health; it does not fail the runtime.
func (rt *Runtime) checkConnections() {
	defer rt.wg.Done()
	names := rt.conns.Names()
	rt.connHealth.mu.Lock()
	rt.connHealth.state = make(map[string]connState, len(names))
	for _, n := range names {
		rt.connHealth.state[n] = connState{Status: "unchecked"}
	}
	rt.connHealth.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-rt.done; cancel() }()
	t := time.NewTicker(connCheckEvery)
	defer t.Stop()
	for {
		for _, n := range names {
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			err := rt.conns.Check(cctx, n)
			ccancel()
			if ctx.Err() != nil {
				return
			}
			st := connState{Status: "ok", CheckedAt: rt.now().UTC()}
			switch {
			case errors.Is(err, connections.ErrNoTestPath):
				st = connState{Status: "unchecked"}
			case err != nil:
				st.Status, st.Error = "error", err.Error()
			}
			if ms, ok := rt.conns.MCPStatus(n); ok {
				st.MCP = &ms
			}
			rt.connHealth.mu.Lock()
			rt.connHealth.state[n] = st
			rt.connHealth.mu.Unlock()
		}
		select {
		case <-rt.done:
			return
		case <-t.C:
		}
	}
}
