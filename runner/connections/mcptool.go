package connections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"svc/runner/models"
	"svc/runner/tools"
)

// SpanMCPCall is the name of the span of one MCP tool call (a child of the loop's
// execute_tool span). It records the connection and the tool, never arguments or results.
const SpanMCPCall = "svc.mcp.call"

// MCPTool is one tool of an mcp connection, offered to the model as <connection>__<tool>. It
// implements tools.Tool, tools.Labeler and tools.Approver, and is safe for concurrent use.
type MCPTool struct {
	src      *mcpSource
	tool     string // the server's name
	readOnly bool   // the server's readOnlyHint, when listed
	spec     models.ToolSpec
}

var (
	_ tools.Tool     = (*MCPTool)(nil)
	_ tools.Labeler  = (*MCPTool)(nil)
	_ tools.Approver = (*MCPTool)(nil)
)

// MCPTools returns the tools of the mcp connections among names, sorted by name: each
// connection is initialised and listed now (or its cached list used), under its bound
// (MaxMCPTools, valid names and schemas). A connection that cannot be reached offers no tool
// and is returned in the error (joined, without secrets), which the caller reports without
// failing: its health shows it too. REST names are ignored.
func (c *Client) MCPTools(ctx context.Context, names []string) ([]tools.Tool, error) {
	var (
		out  []tools.Tool
		errs []error
	)
	for _, n := range slices.Sorted(slices.Values(names)) {
		cn := c.conns[n]
		if cn == nil || cn.mcp == nil {
			continue
		}
		_, listed, err := cn.mcp.ensure(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(listed)) {
			out = append(out, newMCPTool(cn.mcp, listed[name]))
		}
	}
	return out, errors.Join(errs...)
}

func newMCPTool(src *mcpSource, t *mcp.Tool) *MCPTool {
	schema, _ := json.Marshal(t.InputSchema) // checked by checkMCPSchema when listed
	desc := t.Description
	if desc == "" && t.Annotations != nil {
		desc = t.Annotations.Title
	}
	desc = strings.TrimSpace(desc + " (MCP server " + src.cn.def.Name + ")")
	return &MCPTool{
		src: src, tool: t.Name, readOnly: t.Annotations != nil && t.Annotations.ReadOnlyHint,
		spec: models.ToolSpec{Name: mcpPrefix(src.cn.def.Name) + t.Name, Description: desc, Parameters: schema},
	}
}

// Spec implements tools.Tool.
func (t *MCPTool) Spec() models.ToolSpec { return t.spec }

// Connection returns the tool's connection.
func (t *MCPTool) Connection() string { return t.src.cn.def.Name }

// Labels implements tools.Labeler.
func (t *MCPTool) Labels(json.RawMessage) (running, completed string) {
	what := t.src.cn.def.Name + ": " + t.tool
	return "Calling " + what, "Called " + what
}

// decide rules the call by the tool's name and its readOnlyHint. In an eval, a tool the server
// does not mark readOnlyHint is a write: refused unless the eval allows the connection's writes,
// and then not asked about (the eval's permission stands for the user's approval), as for
// the request tool.
func (t *MCPTool) decide(call tools.Call) toolVerdict {
	v := t.src.cn.toolRules.decide(t.tool, t.readOnly)
	if ev := call.Session.Eval; ev != nil && !t.readOnly && v.action != AccessDeny {
		name := t.src.cn.def.Name
		if !ev.MayWrite(name) {
			return toolVerdict{action: AccessDeny, rule: "eval, which makes no writes unless it allows them: add the line \"Allow writes: " + name + "\" under ## Setup of the eval"}
		}
		v.action = AccessAllow
	}
	return v
}

// NeedsApproval implements tools.Approver: a request when the tool's rule is confirm (or, with
// no rule, when the server does not mark it readOnlyHint); an error, without asking, when it is
// deny.
func (t *MCPTool) NeedsApproval(ctx context.Context, call tools.Call) (*tools.ApprovalRequest, error) {
	v := t.decide(call)
	switch v.action {
	case AccessDeny:
		return nil, t.denied(v)
	case AccessConfirm:
		return &tools.ApprovalRequest{Endpoint: t.spec.Name, Method: "CALL", Connection: t.src.cn.def.Name,
			Reason: "The " + v.rule + " asks the user before calling " + t.tool + "."}, nil
	}
	return nil, nil
}

func (t *MCPTool) denied(v toolVerdict) error {
	return fmt.Errorf("connection %s: tool %s is denied by the %s", t.src.cn.def.Name, t.tool, v.rule)
}

// Call implements tools.Tool: the rules again (deny never reaches the server; approval is the
// loop's, through NeedsApproval), the connection's rate limit, then tools/call on the session,
// re-initialised once if the server forgot it. The result is the tool's text content (other
// content described), credentials redacted, cut to MaxBodyBytes; a tool error is a result with
// IsError. Transport errors and answers over MaxMCPResponseBytes are errors without secrets.
func (t *MCPTool) Call(ctx context.Context, call tools.Call) (tools.Result, error) {
	began := time.Now()
	name := t.src.cn.def.Name
	log := t.src.c.log
	attrs := []slog.Attr{slog.String("session", call.Session.ID), slog.String("connection", name), slog.String("tool", t.tool)}
	if v := t.decide(call); v.action == AccessDeny {
		err := t.denied(v)
		log.LogAttrs(ctx, slog.LevelInfo, "mcp tool call refused", append(attrs, slog.String("err", err.Error()))...)
		return tools.Result{}, err
	}
	if lim := t.src.cn.limit; lim != nil {
		if ok, wait := lim.take(t.src.c.opts.Now()); !ok {
			rl := t.src.cn.def.Access.RateLimit
			return tools.Result{}, &RateLimitError{Connection: name, RequestsPerMinute: rl.RequestsPerMinute, Burst: rl.Burst, RetryAfter: wait}
		}
	}
	args := call.Arguments
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	ctx, span := trace.SpanFromContext(ctx).TracerProvider().Tracer("svc/runner/connections").Start(ctx, SpanMCPCall,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("svc.connection", name), attribute.String("svc.mcp.tool", t.tool)))
	defer span.End()
	cctx, cancel := context.WithTimeout(ctx, t.src.c.opts.Timeout)
	defer cancel()
	t.src.tooBig.Store(false)
	res, err := t.src.callTool(cctx, t.tool, args)
	_, red, _ := t.src.c.mcpHeaders(ctx, t.src.cn) // nil redactor (changes nothing) when a secret is unset
	attrs = append(attrs, slog.Int64("duration_ms", time.Since(began).Milliseconds()))
	if err != nil {
		if errors.Is(err, errMCPTooBig) || t.src.tooBig.Load() {
			err = fmt.Errorf("connection %s: tool %s: the result is over the limit of %d bytes; ask for less", name, t.tool, MaxMCPResponseBytes)
		} else {
			err = red.err(fmt.Errorf("connection %s: tool %s: %w", name, t.tool, err))
		}
		span.SetStatus(codes.Error, err.Error())
		log.LogAttrs(ctx, slog.LevelInfo, "mcp tool call failed", append(attrs, slog.String("err", err.Error()))...)
		return tools.Result{}, err
	}
	text, cut := mcpResultText(res, red)
	span.SetAttributes(attribute.Bool("svc.mcp.is_error", res.IsError))
	log.LogAttrs(ctx, slog.LevelInfo, "mcp tool call", append(attrs, slog.Bool("is_error", res.IsError), slog.Int("bytes", len(text)))...)
	data := encodeJSON(struct {
		Content string `json:"content"`
		IsError bool   `json:"is_error,omitempty"`
		Cut     *Cut   `json:"cut,omitempty"`
	}{text, res.IsError, cut})
	return tools.Result{Content: text, Data: data, IsError: res.IsError}, nil
}

// mcpResultText is the model's text of a tool result: text content as it is, other content
// described, the structured content when there is no text; redacted, then cut to MaxBodyBytes.
func mcpResultText(res *mcp.CallToolResult, red *redactor) (string, *Cut) {
	var b strings.Builder
	for _, c := range res.Content {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		switch x := c.(type) {
		case *mcp.TextContent:
			b.WriteString(x.Text)
		case *mcp.ImageContent:
			fmt.Fprintf(&b, "[image %s, %d bytes]", x.MIMEType, len(x.Data))
		case *mcp.AudioContent:
			fmt.Fprintf(&b, "[audio %s, %d bytes]", x.MIMEType, len(x.Data))
		case *mcp.ResourceLink:
			fmt.Fprintf(&b, "[resource %s]", x.URI)
		case *mcp.EmbeddedResource:
			if x.Resource != nil && x.Resource.Text != "" {
				b.WriteString(x.Resource.Text)
			} else {
				b.WriteString("[embedded resource]")
			}
		default:
			b.WriteString("[content the agent cannot show]")
		}
	}
	if b.Len() == 0 && res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err == nil {
			b.Write(raw)
		}
	}
	text := red.str(b.String())
	if len(text) <= MaxBodyBytes {
		return text, nil
	}
	return cutText(text, int64(len(text)), false)
}
