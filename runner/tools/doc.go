// Package tools owns what the agent loop can call: the Tool interface, the Set offered to a
// model, and the built-in tools load_knowledge and load_skill.
//
// The interface is deliberately small (a spec and a call) so that the later kinds of tools —
// generated store tools, connection requests, composite and durable TypeScript tools — plug in
// as further implementations, chosen in ForAgent. Until they exist, ForAgent leaves them out
// and reports what it left out, so that the runtime can say so instead of faking results.
package tools
