package models

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
)

// AnthropicConfig configures an Anthropic Messages provider. Zero values are defaults.
type AnthropicConfig struct {
	APIKey     string
	BaseURL    string       // "" means https://api.anthropic.com; /v1/messages is appended
	HTTPClient *http.Client // nil: a client with the default transport and no timeout
	// MaxRetries is how often a 429, 5xx (529 included) or connection failure is retried before
	// the first event: 0 means DefaultMaxRetries, a negative value none.
	MaxRetries int
	// RetryBaseDelay is the first backoff; 0 means DefaultRetryBaseDelay.
	RetryBaseDelay time.Duration
	// Model and Effort apply to requests that leave theirs empty.
	Model  string
	Effort string
}

// DefaultAnthropicMaxTokens is the answer budget of a request with MaxTokens 0 (the Messages
// API requires one).
const DefaultAnthropicMaxTokens = 4096

// Anthropic streams from the Anthropic Messages API. An Effort turns extended thinking on with
// a budget (see ThinkingBudget); thinking is then streamed as EventThinkingDelta and returned,
// with its signature, in the Response message so that it can be sent back in a tool loop.
// Redacted thinking blocks are dropped. It is safe for concurrent use.
type Anthropic struct {
	messages anthropic.MessageService
	cfg      AnthropicConfig
	retry    retrier
}

var _ Provider = (*Anthropic)(nil)

// NewAnthropic returns a provider for cfg. It reads no environment variable or profile.
func NewAnthropic(cfg AnthropicConfig) *Anthropic {
	httpClient := cfg.HTTPClient
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithHTTPClient(httpClient),
		option.WithMaxRetries(0), // retries are ours, see retrier
		option.WithAPIKey(cfg.APIKey),
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	client := anthropic.NewClient(opts...)
	return &Anthropic{
		messages: client.Messages,
		cfg:      cfg,
		retry:    newRetrier(ProviderAnthropic, cfg.MaxRetries, cfg.RetryBaseDelay, cfg.APIKey),
	}
}

// ThinkingBudget is the thinking budget, in tokens, of an effort: low 2048, medium 8192,
// high 16384, "" 0 (thinking off). The request's max_tokens is the budget plus MaxTokens, so
// that thinking does not eat the answer's room.
func ThinkingBudget(effort string) int {
	switch effort {
	case EffortLow:
		return 2048
	case EffortMedium:
		return 8192
	case EffortHigh:
		return 16384
	}
	return 0
}

// Stream implements Provider. On error it also returns what was received so far.
func (p *Anthropic) Stream(ctx context.Context, req Request, emit func(Event) error) (Response, error) {
	params, err := p.params(&req)
	if err != nil {
		return Response{}, err
	}
	em := emitter{emit: emit}
	var acc anthropicAccumulator
	err = p.retry.run(ctx, &em, func() error {
		acc.reset()
		return p.attempt(ctx, &params, &em, &acc)
	})
	return acc.response(), err
}

// attempt makes one HTTP call and reads its stream into acc. As for OpenAI, the SDK sends the
// request and reports HTTP errors, and its SSE decoder (which also turns error events into
// *anthropic.Error) reads the stream, into anthropicEvent rather than the SDK's event union,
// whose reflective decoder costs several times more per event.
func (p *Anthropic) attempt(ctx context.Context, params *anthropic.MessageNewParams, em *emitter, acc *anthropicAccumulator) error {
	var res *http.Response
	sdk := p.messages.NewStreaming(ctx, *params, option.WithResponseBodyInto(&res))
	if err := sdk.Err(); err != nil {
		if res != nil && res.Body != nil {
			_ = res.Body.Close() // already read into the error
		}
		return p.translate(err)
	}
	if res == nil || res.Body == nil {
		return p.retry.streamError("no response body", true)
	}
	stream := ssestream.NewStream[anthropicEvent](ssestream.NewDecoder(res), nil)
	defer func() { _ = stream.Close() }() // a read-only body: nothing to report on close
	for stream.Next() {
		ev := stream.Current()
		if err := acc.add(&ev, em); err != nil {
			return err
		}
	}
	if err := stream.Err(); err != nil {
		return p.translate(err)
	}
	if !acc.stopped {
		return p.retry.streamError("the stream ended before message_stop", true)
	}
	return nil
}

// anthropicEvent is the part of a Messages stream event the provider reads.
type anthropicEvent struct {
	Type    string `json:"type"`
	Index   int64  `json:"index"`
	Message struct {
		Usage anthropicUsage `json:"usage"`
	} `json:"message"` // message_start
	ContentBlock struct {
		Type     string `json:"type"`
		ID       string `json:"id"`
		Name     string `json:"name"`
		Text     string `json:"text"`
		Thinking string `json:"thinking"`
	} `json:"content_block"` // content_block_start
	Delta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"` // message_delta
	} `json:"delta"`
	Usage anthropicUsage `json:"usage"` // message_delta
}

// anthropicUsage is the usage object of message_start and message_delta.
type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
}

// translate turns an SDK error into an *APIError. An error event inside a 200 stream carries
// the type of the error, which gives its status back.
func (p *Anthropic) translate(err error) error {
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		return p.retry.transportError(err)
	}
	status := apiErr.StatusCode
	var header http.Header
	if apiErr.Response != nil {
		header = apiErr.Response.Header
	}
	if status < 400 {
		header = nil // the header of the 200 stream says nothing about the error
		switch apiErr.Type() {
		case "overloaded_error":
			status = 529
		case "rate_limit_error":
			status = http.StatusTooManyRequests
		case "api_error":
			status = http.StatusInternalServerError
		default:
			return p.retry.streamError(cmp.Or(apiErr.Message, "error event in stream"), false)
		}
	}
	return p.retry.httpError(status, apiErr.Message, header)
}

// params builds the SDK request.
func (p *Anthropic) params(req *Request) (anthropic.MessageNewParams, error) {
	var params anthropic.MessageNewParams
	model := cmp.Or(req.Model, p.cfg.Model)
	if model == "" {
		return params, fmt.Errorf("%w: anthropic: request has no model", ErrBadRequest)
	}
	effort := cmp.Or(req.Effort, p.cfg.Effort)
	if err := checkEffort(effort); err != nil {
		return params, err
	}
	params.Model = model
	maxTokens := int64(cmp.Or(max(req.MaxTokens, 0), DefaultAnthropicMaxTokens))
	if budget := ThinkingBudget(effort); budget > 0 {
		params.Thinking.OfEnabled = &anthropic.ThinkingConfigEnabledParam{BudgetTokens: int64(budget)}
		maxTokens += int64(budget)
	}
	params.MaxTokens = maxTokens
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System, CacheControl: anthropic.NewCacheControlEphemeralParam()}}
	}
	msgs, err := anthropicMessages(req.Messages)
	if err != nil {
		return params, err
	}
	params.Messages = msgs
	if len(req.Tools) > 0 {
		params.Tools = make([]anthropic.ToolUnionParam, 0, len(req.Tools))
		for i := range req.Tools {
			t := &req.Tools[i]
			schema, err := toolSchema(i, t)
			if err != nil {
				return params, err
			}
			tool := &anthropic.ToolParam{Name: t.Name, InputSchema: inputSchema(schema)}
			if t.Description != "" {
				tool.Description = anthropic.String(t.Description)
			}
			params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: tool})
		}
	}
	return params, nil
}

// anthropicMessages converts the conversation. Consecutive messages of one side merge into one
// turn (parallel tool results must share one user message); the last user turn gets a cache
// breakpoint so that an agent loop reads its history from the prompt cache.
func anthropicMessages(in []Message) ([]anthropic.MessageParam, error) {
	out := make([]anthropic.MessageParam, 0, len(in))
	add := func(user bool, blocks ...anthropic.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 {
			if last := out[n-1].OfUser; user && last != nil {
				last.Content = append(last.Content, blocks...)
				return
			}
			if last := out[n-1].OfAssistant; !user && last != nil {
				last.Content = append(last.Content, blocks...)
				return
			}
		}
		if user {
			out = append(out, anthropic.NewUserMessage(blocks...))
		} else {
			out = append(out, anthropic.NewAssistantMessage(blocks...))
		}
	}
	for i := range in {
		m := &in[i]
		if err := checkParts(i, m); err != nil {
			return nil, err
		}
		switch m.Role {
		case RoleUser:
			blocks := make([]anthropic.ContentBlockParamUnion, 0, len(m.Parts)+1)
			if strings.TrimSpace(m.Content) != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
			for j := range m.Parts {
				blocks = append(blocks, anthropicPart(&m.Parts[j]))
			}
			add(true, blocks...)
		case RoleAssistant:
			blocks := make([]anthropic.ContentBlockParamUnion, 0, len(m.ToolCalls)+2)
			if m.Thinking != "" && m.ThinkingSignature != "" {
				blocks = append(blocks, anthropic.NewThinkingBlock(m.ThinkingSignature, m.Thinking))
			}
			if strings.TrimSpace(m.Content) != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
			for _, tc := range m.ToolCalls {
				input := json.RawMessage("{}")
				if isJSONObject(tc.Arguments) {
					input = tc.Arguments
				}
				blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, input, tc.Name))
			}
			add(false, blocks...)
		case RoleTool:
			if m.ToolCallID == "" {
				return nil, fmt.Errorf("%w: messages[%d]: tool message has no tool_call_id", ErrBadRequest, i)
			}
			result := &anthropic.ToolResultBlockParam{ToolUseID: m.ToolCallID}
			if m.Content != "" {
				result.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: m.Content}}}
			}
			if m.IsError {
				result.IsError = anthropic.Bool(true)
			}
			add(true, anthropic.ContentBlockParamUnion{OfToolResult: result})
		default:
			return nil, fmt.Errorf("%w: messages[%d]: unknown role %q", ErrBadRequest, i, m.Role)
		}
	}
	if n := len(out); n > 0 && out[n-1].OfUser != nil {
		blocks := out[n-1].OfUser.Content
		if cc := blocks[len(blocks)-1].GetCacheControl(); cc != nil {
			*cc = anthropic.NewCacheControlEphemeralParam()
		}
	}
	return out, nil
}

// anthropicPart converts a checked part: images and PDFs as base64 blocks, text as a plain
// text document titled with the file name.
func anthropicPart(p *Part) anthropic.ContentBlockParamUnion {
	switch kindOf(p.MimeType) {
	case partImage:
		return anthropic.NewImageBlockBase64(mediaType(p.MimeType), base64.StdEncoding.EncodeToString(p.Data))
	case partPDF:
		doc := anthropic.NewDocumentBlock(anthropic.Base64PDFSourceParam{Data: base64.StdEncoding.EncodeToString(p.Data)})
		if p.Filename != "" {
			doc.OfDocument.Title = anthropic.String(p.Filename)
		}
		return doc
	default:
		doc := anthropic.NewDocumentBlock(anthropic.PlainTextSourceParam{Data: string(p.Data)})
		if p.Filename != "" {
			doc.OfDocument.Title = anthropic.String(p.Filename)
		}
		return doc
	}
}

// inputSchema maps a JSON Schema object onto the SDK's input schema (type is always object).
func inputSchema(schema map[string]any) anthropic.ToolInputSchemaParam {
	var in anthropic.ToolInputSchemaParam
	for k, v := range schema {
		switch k {
		case "type":
		case "properties":
			in.Properties = v
		case "required":
			list, _ := v.([]any) // anything else is not a valid "required"; drop it
			for _, r := range list {
				if s, ok := r.(string); ok {
					in.Required = append(in.Required, s)
				}
			}
		default:
			if in.ExtraFields == nil {
				in.ExtraFields = map[string]any{}
			}
			in.ExtraFields[k] = v
		}
	}
	return in
}

// anthropicBlock is a content block being streamed.
type anthropicBlock struct {
	kind string // text, thinking, tool_use, or another type we skip
	id   string
	name string
	args strings.Builder
}

// anthropicAccumulator assembles the events of one attempt.
type anthropicAccumulator struct {
	stopped   bool // message_stop was read
	text      strings.Builder
	thinking  strings.Builder
	signature strings.Builder
	blocks    []*anthropicBlock
	calls     []ToolCall
	reason    string
	input     int // uncached input tokens
	output    int
	cacheRead int
	cacheNew  int
}

// reset forgets a failed attempt.
func (a *anthropicAccumulator) reset() { *a = anthropicAccumulator{} }

// block returns the block at index i, growing the list as needed.
func (a *anthropicAccumulator) block(i int64) *anthropicBlock {
	for int64(len(a.blocks)) <= i {
		a.blocks = append(a.blocks, &anthropicBlock{})
	}
	return a.blocks[i]
}

// add reads one event, emitting text, thinking and finished tool calls.
func (a *anthropicAccumulator) add(ev *anthropicEvent, em *emitter) error {
	switch ev.Type {
	case "message_start":
		u := &ev.Message.Usage
		a.input, a.output = u.InputTokens, u.OutputTokens
		a.cacheRead, a.cacheNew = u.CacheReadInputTokens, u.CacheCreationInputTokens
	case "content_block_start":
		if ev.Index < 0 {
			return nil
		}
		b := a.block(ev.Index)
		cb := &ev.ContentBlock
		b.kind, b.id, b.name = cb.Type, cb.ID, cb.Name
		switch cb.Type {
		case "text":
			return a.emitText(cb.Text, em)
		case "thinking":
			return a.emitThinking(cb.Thinking, em)
		}
	case "content_block_delta":
		switch ev.Delta.Type {
		case "text_delta":
			return a.emitText(ev.Delta.Text, em)
		case "thinking_delta":
			return a.emitThinking(ev.Delta.Thinking, em)
		case "signature_delta":
			a.signature.WriteString(ev.Delta.Signature)
		case "input_json_delta":
			if ev.Index >= 0 {
				a.block(ev.Index).args.WriteString(ev.Delta.PartialJSON)
			}
		}
	case "content_block_stop":
		if ev.Index < 0 || ev.Index >= int64(len(a.blocks)) || a.blocks[ev.Index].kind != "tool_use" {
			return nil
		}
		b := a.blocks[ev.Index]
		a.calls = append(a.calls, ToolCall{ID: b.id, Name: b.name, Arguments: toolArguments(b.args.String())})
		return em.send(Event{Type: EventToolCall, ToolCall: &a.calls[len(a.calls)-1]})
	case "message_delta":
		if r := ev.Delta.StopReason; r != "" {
			a.reason = r
		}
		u := &ev.Usage
		a.output = max(a.output, u.OutputTokens)
		if u.InputTokens > 0 {
			a.input = u.InputTokens
		}
		if u.CacheReadInputTokens > 0 {
			a.cacheRead = u.CacheReadInputTokens
		}
		if u.CacheCreationInputTokens > 0 {
			a.cacheNew = u.CacheCreationInputTokens
		}
	case "message_stop":
		a.stopped = true
	}
	return nil
}

// emitText records and emits a piece of answer text.
func (a *anthropicAccumulator) emitText(s string, em *emitter) error {
	if s == "" {
		return nil
	}
	a.text.WriteString(s)
	return em.send(Event{Type: EventTextDelta, Text: s})
}

// emitThinking records and emits a piece of thinking.
func (a *anthropicAccumulator) emitThinking(s string, em *emitter) error {
	if s == "" {
		return nil
	}
	a.thinking.WriteString(s)
	return em.send(Event{Type: EventThinkingDelta, Text: s})
}

// response is the answer assembled so far.
func (a *anthropicAccumulator) response() Response {
	var stop string
	switch a.reason {
	case "":
	case "tool_use":
		stop = "tool_calls"
	case "max_tokens", "model_context_window_exceeded":
		stop = "length"
	case "refusal":
		stop = "content_filter"
	default: // end_turn, stop_sequence, pause_turn
		stop = "stop"
	}
	if len(a.calls) > 0 {
		stop = "tool_calls"
	}
	return Response{
		Message: Message{
			Role:              RoleAssistant,
			Content:           a.text.String(),
			ToolCalls:         a.calls,
			Thinking:          a.thinking.String(),
			ThinkingSignature: a.signature.String(),
		},
		Usage: Usage{
			InputTokens:  a.input + a.cacheRead + a.cacheNew,
			OutputTokens: a.output,
			CachedTokens: a.cacheRead,
		},
		StopReason: stop,
	}
}
