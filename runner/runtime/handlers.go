package runtime

import (
	"fmt"

	"svc/agent"
	"svc/runner/handlers"
	"svc/runner/stores"
	"svc/runner/tools"
)

// handlerTools returns the maker of the agent's handler tools (svc/tools): compiled once per
// runtime, each with the children its ctx.callTool may reach.
func (rt *Runtime) handlerTools(records *stores.Records) func(*agent.Tool) (tools.Tool, error) {
	cache := handlers.NewCache()
	var newTool func(t *agent.Tool) (tools.Tool, error)
	// child resolves a name of uses.tools: a store tool, another handler tool, or a built-in.
	child := func(name string) (tools.Tool, error) {
		if _, action, ok := agent.ParseStoreToolName(name); ok {
			for store := range rt.ag.Stores {
				if agent.StoreToolName(store, action) == name {
					return stores.NewTool(records, store, action)
				}
			}
		}
		if t := rt.ag.Tools[name]; t != nil {
			if t.Durable() {
				return nil, fmt.Errorf("%s is a durable tool, which an inline tool cannot call", name)
			}
			return newTool(t)
		}
		switch name {
		case tools.NameLoadKnowledge:
			return tools.NewLoadKnowledge(rt.ag.Knowledge), nil
		case tools.NameLoadSkill:
			return tools.NewLoadSkill(rt.ag.Skills), nil
		}
		return nil, fmt.Errorf("no tool %s for a handler to call", name)
	}
	newTool = func(t *agent.Tool) (tools.Tool, error) {
		h, err := handlers.New(t, handlers.Options{Cache: cache, Children: child, MaxDepth: rt.opts.CompositeMaxDepth, MaxCalls: rt.opts.CompositeMaxCalls})
		if err != nil || !t.RequiresConfirmation {
			return h, err
		}
		return confirming{h}, nil
	}
	return newTool
}
