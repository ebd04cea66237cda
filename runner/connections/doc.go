// Package connections runs the connection tool "request" (CONTRACT §7): HTTP calls from the
// model to the APIs an agent declares under svc/connections, under the endpoint rules of their
// policy.json and access.json. The model only ever chooses a connection, a method, a path
// relative to the connection's base URL, a query, a JSON body and an intent; the host, the
// credentials and the rules are the agent author's, so everything the model writes is checked
// as untrusted input.
//
// # What a call goes through
//
// Call (and NeedsApproval and Decide, which stop before the network) checks, in order: the
// arguments (unknown fields refused), the connection (one of the tool's), the method, the
// intent (a mutating method needs "write" or "confirmed_write"), the path (parsePath: no scheme
// or absolute URL, no "//host", no backslash, no "." or ".." segment also when percent-encoded
// or followed by ";params", no empty or control-character segment; {{context.KEY}} filled from
// the chat's context, escaped as one segment), the query ({{context.KEY}} filled; a name the
// connection's auth sets is refused), the body (JSON, methods that send one, at most 1 MiB),
// and the endpoint rules (rules.decide: most specific rule first, see moreSpecific; access.json
// deny refuses; a write needs an explicit rule, the "*" fallback refuses writes). Only then does
// Call take a token from the connection's rate limit, resolve the base URL and the auth block
// through Options.Secret (at call time, so a rotated secret applies at once), and send.
//
// Call never asks for approval: the loop does, through NeedsApproval, before Call. Call still
// re-checks everything else, so a caller that skipped NeedsApproval cannot get past a deny rule,
// a bad path or a missing intent. confirmed_write is the model's claim that the user already
// agreed in the conversation: it satisfies the intent rule and is reported (Decision.Escalated),
// but never replaces an approval a rule asks for (see IntentConfirmedWrite).
//
// # Where a request may go
//
// Only to the host and port of the connection's base URL: the URL is built from the base URL's
// scheme and host and the checked path, the transport has no proxy, and its dialer refuses any
// address but that host and port (the request's context carries it). Redirects are never
// followed, to another host or the same one: the 3xx comes back with its Location header and
// the model may call that path itself, through the rules. The dialer resolves the name on
// every dial and refuses it when any address is link-local (169.254.0.0/16, fe80::/10) or a
// cloud metadata address (fd00:ec2::254, 100.100.100.200, also IPv4-mapped and NAT64 forms),
// and refuses the metadata names (metadata.google.internal, metadata.goog, metadata,
// instance-data) whatever they resolve to; Control re-checks the socket's address. So a name
// that answers differently later (DNS rebinding) is caught. Options.AllowMetadata, the setting
// SVC_ALLOW_METADATA_ADDRESSES, lifts those refusals. Loopback and private addresses stay
// allowed: svc dev calls local APIs, and the base URL is the author's choice.
//
// # What comes back
//
// A Response as JSON: {status, headers, body}, plus cut or note when they apply. Headers are an
// allow-list (returnedHeaders: content type, Location, paging, rate limit, request id; never
// Set-Cookie or WWW-Authenticate). A JSON body (by type, or an untyped or text body shaped like
// JSON) is parsed, its hidden fields removed (see hidden), and returned parsed; a body whose
// text for the model is over MaxBodyBytes (64 KiB) is cut with a marker and its size. A text
// body that mentions a hidden field's name is withheld, since the field cannot be removed from
// it; a binary body is described, not shown. An HTTP error status is a result, not an error.
//
// # Secrets
//
// Credential values (the auth block's env: references, resolved per call) are sent and
// otherwise never leave the package: every string of a result (headers, body, keys included),
// every error and every log line passes through the request's redactor, which replaces each
// value as it is, query- and path-escaped, and each long part of a value with spaces
// ("Bearer sk-..." hides "sk-..." too). It replaces whole tokens only: an occurrence that a
// letter or digit continues (the secret "abcd1234" inside "abcd12345") is another word and is
// left as it is, so that redaction never rewrites the middle of unrelated data. That is only
// safe for secrets of some length: an auth value whose credential (the value, or its last
// space-separated part) has fewer than MinCredentialLen (8) characters is refused when it is
// resolved, with a ShortCredentialError naming the connection, the field and the variable, as
// the call's error result and on /health (Check reports it also without a testPath).
// Redaction happens before a body is cut, so a cut cannot leave half a secret. Logs name the
// connection, method, path, status and duration only.
//
// # MCP servers
//
// A connection of format mcp (agent.FormatMCP) is an MCP server over Streamable HTTP, not a
// REST API: the request tool refuses it (Tool, RESTNames) and MCPTools offers its tools as
// <connection>__<tool> (MCPTool). Its session (mcpsource.go) is opened with the SDK's client at
// first use, through the Client's transport (mcptransport.go: the checked dialer, only the base
// URL's host and port, the auth headers resolved per HTTP request, a POST's answer read at
// most MaxMCPResponseBytes). The list is read whole (every page, at most 20,000), then bounded
// to MaxMCPTools valid tools by name; it is cached, and listed again after
// notifications/tools/list_changed and at each Check. Tools rules (mcprules.go) are allow,
// confirm or deny by name or "*", the stricter of the two files; without a rule, readOnlyHint
// tools are allowed and others confirmed. A call that meets mcp.ErrSessionMissing (404 on the
// session id) re-initialises once and is sent once more. Check of an mcp connection is
// initialize (when needed) and tools/list; MCPStatus is what /health shows of it.
//
// # Wiring (for the runtime)
//
// Client: once per agent bundle, when the runtime starts, with rt.env the runtime's Options.Env
// (the agent's secrets first, then the process environment) and the setting
// SVC_ALLOW_METADATA_ADDRESSES (false by default) declared with the other flags:
//
//	client, err := connections.New(slices.Collect(maps.Values(ag.Connections)), connections.Options{
//		Secret: func(_ context.Context, name string) (string, bool, error) {
//			v, ok := rt.env(name)
//			return v, ok, nil
//		},
//		Logger:        log,
//		AllowMetadata: cfg.AllowMetadataAddresses,
//	})
//
// An error names the connection and the file: fail the start with it. Build one Client per
// agent, not per profile, since the rate limits live in it. client.Close() at shutdown closes
// its idle connections.
//
// Tools: for each profile (turn.NewProfiles builds one per named agent and skill), add
// client.Tool(named.Connections) for a named agent and client.Tool(client.Names()) for the
// unscoped chat, nothing when the list is empty, and drop "connection X" from
// tools.Selection.Omitted. runner/tools cannot import this package (it implements tools.Tool:
// a cycle), so the tool comes in as an extra tool where profiles are built, not from
// tools.ForAgent.
//
// Prompt: Prompt(conns) over the same connections is the section to append to the compiled
// system prompt (after skills and knowledge). It may hold {{context.KEY}} templates from
// surface.md, so mark the profile Templated when it does.
//
// Approvals: the loop asks tools.Approver.NeedsApproval before Call (an error is the call's
// error result, without asking). For the confirmation_required frame, (*Tool).Decide gives
// endpoint (Decision.Endpoint), method, reason, escalated and connection_name
// (Decision.Connection); params are the call's arguments.
//
// GET /inspect/connections/{name}: Describe(conn), plus what the runtime already adds (the base
// URL resolved when it is an env: reference, whether each credential is set).
//
// GET /health: client.Check(ctx, name) for each connection (ErrNoTestPath: nothing to check).
// Each Check is one request to the API, outside the rate limit: cache the answers for a while
// rather than probing on every /health.
//
// Composite tools: spec 4.7 rule 4 has inline composites refuse child tools of the connection
// category; a runner that lets a child call request must call NeedsApproval first and refuse
// (or ask) when it is true, since Call does not ask.
package connections
