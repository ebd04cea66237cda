package runtime

import (
	"context"
	"maps"
	"slices"

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
	client, err := connections.New(slices.Collect(maps.Values(rt.ag.Connections)), connections.Options{
		Secret:        func(_ context.Context, name string) (string, bool, error) { v, ok := env(name); return v, ok, nil },
		Transport:     rt.opts.ConnectionTransport,
		Logger:        rt.log,
		AllowMetadata: rt.opts.AllowMetadataAddresses,
		Hint:          rt.opts.SecretHint,
	})
	if err != nil {
		return tools.Extensions{}, err
	}
	rt.conns = client
	ext.Connections = func(names []string) (tools.Tool, string, error) {
		t, err := client.Tool(names)
		if err != nil {
			return nil, "", err
		}
		subset := make([]*agent.Connection, 0, len(names))
		for _, n := range names {
			subset = append(subset, rt.ag.Connections[n])
		}
		return t, connections.Prompt(subset), nil
	}
	return ext, nil
}
