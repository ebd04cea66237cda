// Package tools owns what the agent loop can call: the Tool interface, the Set offered to a
// model, and the built-in tools load_knowledge and load_skill.
//
// The interface is deliberately small (a spec and a call) so that the later kinds of tools —
// generated store tools, connection requests, composite and durable TypeScript tools — plug in
// as further implementations, chosen in ForAgent. Until they exist, ForAgent leaves them out
// and reports what it left out, so that the runtime can say so instead of faking results.
//
// A Set also compiles each tool's parameter schema (package agent/toolschema) when it is built,
// and Set.Check validates a call's arguments against it: the loop checks every call there before
// the tool runs, so that no kind of tool can be forgotten and no tool needs to trust that its
// arguments have the shape its spec promised the model. Schemas shares compiled schemas between
// the sets of one runtime.
package tools
