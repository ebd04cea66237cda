package runtime

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"svc/agent"
	"svc/runner/connections"
	"svc/runner/stores"
	"svc/runner/tools"
)

// extensions are the tools the agent's source declares, beyond the built-ins: its stores' tools,
// its handler tools and, with connections, the request tool (whose client, rate limits
// included, is the runtime's, closed by Close).
func (rt *Runtime) extensions() (tools.Extensions, error) {
	records := rt.records
	ext := tools.Extensions{
		Stores:  func(access map[string]string) []tools.Tool { return stores.Tools(records, access) },
		Handler: rt.handlerTools(records),
		Schemas: rt.schemas,
	}
	if len(rt.ag.Connections) == 0 {
		return ext, nil
	}
	env := rt.opts.Env
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	// unreachable holds the mcp connections that failed while this runtime built its profiles:
	// the next profiles skip them rather than wait for each again (health keeps checking, and a
	// server that answers again comes back through ToolsChanged).
	var (
		mu          sync.Mutex
		unreachable = map[string]bool{}
	)
	rt.toolsChanged = make(chan struct{}, 1)
	client, err := connections.New(slices.Collect(maps.Values(rt.ag.Connections)), connections.Options{
		Secret:        func(_ context.Context, name string) (string, bool, error) { v, ok := env(name); return v, ok, nil },
		Transport:     rt.opts.ConnectionTransport,
		Logger:        rt.log,
		AllowMetadata: rt.opts.AllowMetadataAddresses,
		Hint:          rt.opts.SecretHint,
		ToolsChanged: func(name string) {
			mu.Lock()
			delete(unreachable, name)
			mu.Unlock()
			select {
			case rt.toolsChanged <- struct{}{}:
			default: // a rebuild is due already
			}
		},
	})
	if err != nil {
		return tools.Extensions{}, err
	}
	rt.conns = client
	ext.Connections = func(names []string) ([]tools.Tool, string, error) {
		var rest, servers []string
		for _, n := range names {
			if client.IsMCP(n) {
				servers = append(servers, n)
			} else {
				rest = append(rest, n)
			}
		}
		var (
			out    []tools.Tool
			prompt string
		)
		if len(rest) > 0 {
			t, err := client.Tool(rest)
			if err != nil {
				return nil, "", err
			}
			subset := make([]*agent.Connection, 0, len(rest))
			for _, n := range rest {
				subset = append(subset, rt.ag.Connections[n])
			}
			out, prompt = append(out, t), connections.Prompt(subset)
		}
		mu.Lock()
		servers = slices.DeleteFunc(servers, func(n string) bool { return unreachable[n] })
		mu.Unlock()
		if len(servers) > 0 {
			ts, failed := rt.mcpTools(servers)
			out = append(out, ts...)
			mu.Lock()
			for _, n := range failed {
				unreachable[n] = true
			}
			mu.Unlock()
			var offered []*agent.Connection
			for _, n := range servers {
				if !slices.Contains(failed, n) {
					offered = append(offered, rt.ag.Connections[n])
				}
			}
			if p := connections.MCPPrompt(offered); p != "" {
				prompt = strings.TrimSpace(prompt + "\n\n" + p)
			}
		}
		return out, prompt, nil
	}
	return ext, nil
}

// mcpListTimeout bounds listing the tools of the MCP servers of one profile at load.
const mcpListTimeout = 30 * time.Second

// mcpTools lists the tools of the mcp connections servers (once per deployment: the client
// caches each server's list, refreshed after notifications/tools/list_changed and on each
// health check). A server that cannot be reached offers no tools; the error is logged and
// shown on /health, and the runtime starts without them.
// It returns the servers that failed.
func (rt *Runtime) mcpTools(servers []string) (offered []tools.Tool, failed []string) {
	ctx, cancel := context.WithTimeout(context.Background(), mcpListTimeout)
	defer cancel()
	for _, n := range servers {
		ts, err := rt.conns.MCPTools(ctx, []string{n})
		if err != nil {
			rt.log.Warn("mcp connection offers no tools", "connection", n, "err", err)
			failed = append(failed, n)
			continue
		}
		offered = append(offered, ts...)
	}
	return offered, failed
}

// rebuildTools builds the profiles again whenever an MCP connection's tools may have changed
// (connections.Options.ToolsChanged), until Close: the turns that start next offer the server's
// tools as they are now.
func (rt *Runtime) rebuildTools() {
	defer rt.wg.Done()
	for {
		select {
		case <-rt.done:
			return
		case <-rt.toolsChanged:
			rt.profiles.Rebuild()
		}
	}
}
