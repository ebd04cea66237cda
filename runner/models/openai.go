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

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"
)

// OpenAIConfig configures an OpenAI Chat Completions provider. Zero values are defaults.
type OpenAIConfig struct {
	APIKey string // sent as a bearer token; "" sends none (local compatible servers)
	// BaseURL is the API root, such as https://api.openai.com/v1 (the default) or
	// http://localhost:11434/v1; chat/completions is appended.
	BaseURL    string
	HTTPClient *http.Client // nil: a client with the default transport and no timeout
	// MaxRetries is how often a 429, 5xx or connection failure is retried before the first
	// event: 0 means DefaultMaxRetries, a negative value none.
	MaxRetries int
	// RetryBaseDelay is the first backoff; 0 means DefaultRetryBaseDelay.
	RetryBaseDelay time.Duration
	// Name is the provider name in errors; "" means "openai".
	Name string
	// Model and Effort apply to requests that leave theirs empty.
	Model  string
	Effort string
	// LegacyMaxTokens sends Request.MaxTokens as max_tokens, which older compatible servers
	// know, instead of max_completion_tokens.
	LegacyMaxTokens bool
}

// OpenAI streams Chat Completions from OpenAI or an OpenAI-compatible server. Reasoning deltas
// of compatible servers (a "reasoning_content" or "reasoning" field in the delta) become
// EventThinkingDelta. It is safe for concurrent use.
type OpenAI struct {
	chat  openai.ChatCompletionService
	cfg   OpenAIConfig
	retry retrier
}

var _ Provider = (*OpenAI)(nil)

// NewOpenAI returns a provider for cfg. It reads no environment variable.
func NewOpenAI(cfg OpenAIConfig) *OpenAI {
	if cfg.Name == "" {
		cfg.Name = ProviderOpenAI
	}
	httpClient := cfg.HTTPClient
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	opts := []option.RequestOption{
		option.WithEnvironmentProduction(),
		option.WithHTTPClient(httpClient),
		option.WithMaxRetries(0), // retries are ours, see retrier
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	return &OpenAI{
		chat:  openai.NewChatCompletionService(opts...),
		cfg:   cfg,
		retry: newRetrier(cfg.Name, cfg.MaxRetries, cfg.RetryBaseDelay, cfg.APIKey),
	}
}

// Stream implements Provider. On error it also returns what was received so far.
func (p *OpenAI) Stream(ctx context.Context, req Request, emit func(Event) error) (Response, error) {
	params, err := p.params(&req)
	if err != nil {
		return Response{}, err
	}
	em := emitter{emit: emit}
	var acc openaiAccumulator
	err = p.retry.run(ctx, &em, func() error {
		acc.reset()
		return p.attempt(ctx, &params, &em, &acc)
	})
	return acc.response(), err
}

// attempt makes one HTTP call and reads its stream into acc. The SDK builds, authenticates and
// sends the request and turns HTTP errors into *openai.Error; the stream is read with the SDK's
// SSE decoder into openaiChunk rather than the SDK's chunk type, whose reflective decoder costs
// about 60 allocations per chunk (see BenchmarkOpenAIStream32) and hides the reasoning fields of
// compatible servers in raw JSON.
func (p *OpenAI) attempt(ctx context.Context, params *openai.ChatCompletionNewParams, em *emitter, acc *openaiAccumulator) error {
	var res *http.Response
	sdk := p.chat.NewStreaming(ctx, *params, option.WithResponseBodyInto(&res))
	if err := sdk.Err(); err != nil {
		if res != nil && res.Body != nil {
			_ = res.Body.Close() // already read into the error
		}
		return p.translate(err)
	}
	if res == nil || res.Body == nil {
		return p.retry.streamError("no response body", true)
	}
	stream := ssestream.NewStream[openaiChunk](ssestream.NewDecoder(res), nil)
	defer func() { _ = stream.Close() }() // a read-only body: nothing to report on close
	for stream.Next() {
		chunk := stream.Current()
		if err := acc.add(&chunk, em); err != nil {
			return err
		}
	}
	if err := stream.Err(); err != nil {
		return p.translate(err)
	}
	if !acc.started {
		return p.retry.streamError("the stream ended before any chunk", true)
	}
	return acc.finish(em)
}

// openaiChunk is the part of a chat.completion.chunk the provider reads.
type openaiChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content string `json:"content"`
			Refusal string `json:"refusal"`
			// ReasoningContent is the reasoning of vLLM, DeepSeek and llama.cpp; Reasoning that of
			// Ollama and OpenRouter (a string; other shapes are ignored).
			ReasoningContent string                `json:"reasoning_content"`
			Reasoning        json.RawMessage       `json:"reasoning"`
			ToolCalls        []openaiToolCallDelta `json:"tool_calls"`
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

// openaiToolCallDelta is one piece of a streamed tool call.
type openaiToolCallDelta struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// translate turns an SDK error into an *APIError.
func (p *OpenAI) translate(err error) error {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		var header http.Header
		if apiErr.Response != nil {
			header = apiErr.Response.Header
		}
		return p.retry.httpError(apiErr.StatusCode, apiErr.Message, header)
	}
	var streamErr *ssestream.StreamError
	if errors.As(err, &streamErr) {
		var body struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
				Code    any    `json:"code"`
			} `json:"error"`
		}
		msg := streamErr.Message
		if json.Unmarshal(streamErr.Event.Data, &body) == nil && body.Error.Message != "" {
			msg = body.Error.Message
		}
		kind := strings.ToLower(body.Error.Type + " " + fmt.Sprint(body.Error.Code))
		retryable := strings.Contains(kind, "server_error") || strings.Contains(kind, "rate_limit") ||
			strings.Contains(kind, "overloaded")
		return p.retry.streamError("error event in stream: "+msg, retryable)
	}
	return p.retry.transportError(err)
}

// params builds the SDK request.
func (p *OpenAI) params(req *Request) (openai.ChatCompletionNewParams, error) {
	var params openai.ChatCompletionNewParams
	model := cmp.Or(req.Model, p.cfg.Model)
	if model == "" {
		return params, fmt.Errorf("%w: %s: request has no model", ErrBadRequest, p.cfg.Name)
	}
	effort := cmp.Or(req.Effort, p.cfg.Effort)
	if err := checkEffort(effort); err != nil {
		return params, err
	}
	params.Model = model
	params.StreamOptions.IncludeUsage = openai.Bool(true)
	if effort != "" {
		params.ReasoningEffort = shared.ReasoningEffort(effort)
	}
	if req.MaxTokens > 0 {
		if p.cfg.LegacyMaxTokens {
			params.MaxTokens = openai.Int(int64(req.MaxTokens))
		} else {
			params.MaxCompletionTokens = openai.Int(int64(req.MaxTokens))
		}
	}
	params.Messages = make([]openai.ChatCompletionMessageParamUnion, 0, len(req.Messages)+1)
	if req.System != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(req.System))
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		if err := checkParts(i, m); err != nil {
			return params, err
		}
		msg, err := openaiMessage(i, m)
		if err != nil {
			return params, err
		}
		params.Messages = append(params.Messages, msg)
	}
	if len(req.Tools) > 0 {
		params.Tools = make([]openai.ChatCompletionToolUnionParam, 0, len(req.Tools))
		for i := range req.Tools {
			t := &req.Tools[i]
			schema, err := toolSchema(i, t)
			if err != nil {
				return params, err
			}
			def := shared.FunctionDefinitionParam{Name: t.Name, Parameters: schema}
			if t.Description != "" {
				def.Description = openai.String(t.Description)
			}
			params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(def))
		}
	}
	return params, nil
}

// openaiMessage converts message i.
func openaiMessage(i int, m *Message) (openai.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case RoleUser:
		if len(m.Parts) == 0 {
			return openai.UserMessage(m.Content), nil
		}
		parts := make([]openai.ChatCompletionContentPartUnionParam, 0, len(m.Parts)+1)
		if m.Content != "" {
			parts = append(parts, openai.TextContentPart(m.Content))
		}
		for j := range m.Parts {
			parts = append(parts, openaiPart(&m.Parts[j]))
		}
		return openai.UserMessage(parts), nil
	case RoleAssistant:
		var asst openai.ChatCompletionAssistantMessageParam
		if m.Content != "" || len(m.ToolCalls) == 0 {
			asst.Content.OfString = openai.String(m.Content)
		}
		for _, tc := range m.ToolCalls {
			asst.ToolCalls = append(asst.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: tc.ID,
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name: tc.Name, Arguments: string(toolArguments(string(tc.Arguments))),
					},
				},
			})
		}
		return openai.ChatCompletionMessageParamUnion{OfAssistant: &asst}, nil
	case RoleTool:
		if m.ToolCallID == "" {
			return openai.ChatCompletionMessageParamUnion{}, fmt.Errorf("%w: messages[%d]: tool message has no tool_call_id", ErrBadRequest, i)
		}
		content := m.Content
		if m.IsError && !strings.HasPrefix(strings.ToLower(content), "error") {
			content = "Error: " + content // Chat Completions has no is_error flag
		}
		return openai.ToolMessage(content, m.ToolCallID), nil
	}
	return openai.ChatCompletionMessageParamUnion{}, fmt.Errorf("%w: messages[%d]: unknown role %q", ErrBadRequest, i, m.Role)
}

// openaiPart converts a checked part: images as image_url data URIs, PDFs as file parts, text
// as a text part.
func openaiPart(p *Part) openai.ChatCompletionContentPartUnionParam {
	switch kindOf(p.MimeType) {
	case partImage:
		return openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: dataURI(p)})
	case partPDF:
		file := openai.ChatCompletionContentPartFileFileParam{FileData: openai.String(dataURI(p))}
		file.Filename = openai.String(cmp.Or(p.Filename, "document.pdf"))
		return openai.FileContentPart(file)
	default:
		return openai.TextContentPart(textPart(p))
	}
}

// dataURI encodes a part as data:<type>;base64,<data>.
func dataURI(p *Part) string {
	media := mediaType(p.MimeType)
	var b strings.Builder
	b.Grow(len("data:;base64,") + len(media) + base64.StdEncoding.EncodedLen(len(p.Data)))
	b.WriteString("data:")
	b.WriteString(media)
	b.WriteString(";base64,")
	enc := base64.NewEncoder(base64.StdEncoding, &b)
	_, _ = enc.Write(p.Data) // a strings.Builder does not fail
	_ = enc.Close()
	return b.String()
}

// toolSchema decodes the parameters of tool i; an empty schema is an object without properties.
func toolSchema(i int, t *ToolSpec) (map[string]any, error) {
	if t.Name == "" {
		return nil, fmt.Errorf("%w: tools[%d]: name is empty", ErrBadRequest, i)
	}
	if len(t.Parameters) == 0 {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var schema map[string]any
	if err := json.Unmarshal(t.Parameters, &schema); err != nil || schema == nil {
		return nil, fmt.Errorf("%w: tools[%d] (%s): parameters is not a JSON object", ErrBadRequest, i, t.Name)
	}
	return schema, nil
}

// openaiCall is a tool call being assembled from deltas.
type openaiCall struct {
	index int
	id    string
	name  string
	args  strings.Builder
}

// openaiAccumulator assembles the chunks of one attempt.
type openaiAccumulator struct {
	started  bool // a chunk was decoded
	text     strings.Builder
	thinking strings.Builder
	calls    []*openaiCall
	done     []ToolCall // calls emitted, in index order
	reason   string     // raw finish_reason, "" until seen
	usage    Usage
}

// reset forgets a failed attempt.
func (a *openaiAccumulator) reset() { *a = openaiAccumulator{} }

// add reads one chunk, emitting its text and reasoning.
func (a *openaiAccumulator) add(chunk *openaiChunk, em *emitter) error {
	a.started = true
	for ci := range chunk.Choices {
		ch := &chunk.Choices[ci]
		if ch.Index != 0 {
			continue // n is never set, but be safe
		}
		d := &ch.Delta
		thinking := d.ReasoningContent
		if thinking == "" && len(d.Reasoning) > 1 && d.Reasoning[0] == '"' {
			if json.Unmarshal(d.Reasoning, &thinking) != nil {
				thinking = ""
			}
		}
		if thinking != "" {
			a.thinking.WriteString(thinking)
			if err := em.send(Event{Type: EventThinkingDelta, Text: thinking}); err != nil {
				return err
			}
		}
		for _, text := range [2]string{d.Content, d.Refusal} {
			if text == "" {
				continue
			}
			a.text.WriteString(text)
			if err := em.send(Event{Type: EventTextDelta, Text: text}); err != nil {
				return err
			}
		}
		for ti := range d.ToolCalls {
			a.addCall(&d.ToolCalls[ti])
		}
		if ch.FinishReason != "" && a.reason == "" {
			a.reason = ch.FinishReason
			if err := a.flushCalls(em); err != nil {
				return err
			}
		}
	}
	if u := chunk.Usage; u != nil {
		a.usage = Usage{
			InputTokens:  u.PromptTokens,
			OutputTokens: u.CompletionTokens,
			CachedTokens: u.PromptTokensDetails.CachedTokens,
		}
	}
	return nil
}

// addCall merges a tool call delta. Deltas are matched by index; a new id at a known index
// (servers that leave index at 0 for parallel calls) starts a new call.
func (a *openaiAccumulator) addCall(tc *openaiToolCallDelta) {
	var call *openaiCall
	for i := len(a.calls) - 1; i >= 0; i-- {
		if a.calls[i].index == tc.Index {
			call = a.calls[i]
			break
		}
	}
	if call == nil || (tc.ID != "" && call.id != "" && tc.ID != call.id) {
		call = &openaiCall{index: tc.Index}
		a.calls = append(a.calls, call)
	}
	if tc.ID != "" {
		call.id = tc.ID
	}
	if name := tc.Function.Name; name != "" && name != call.name {
		call.name += name
	}
	call.args.WriteString(tc.Function.Arguments)
}

// flushCalls emits the assembled tool calls once the choice is finished.
func (a *openaiAccumulator) flushCalls(em *emitter) error {
	if len(a.calls) == 0 {
		return nil
	}
	a.done = make([]ToolCall, len(a.calls))
	for i, c := range a.calls {
		a.done[i] = ToolCall{ID: c.id, Name: c.name, Arguments: toolArguments(c.args.String())}
		if a.done[i].ID == "" {
			a.done[i].ID = fmt.Sprintf("call_%d", i+1)
		}
	}
	a.calls = nil
	for i := range a.done {
		if err := em.send(Event{Type: EventToolCall, ToolCall: &a.done[i]}); err != nil {
			return err
		}
	}
	return nil
}

// finish completes a stream that ended without error; a stream cut before its finish_reason
// still counts (the SDK cannot tell [DONE] from a clean end of the body).
func (a *openaiAccumulator) finish(em *emitter) error {
	if a.reason == "" {
		a.reason = "stop"
		return a.flushCalls(em)
	}
	return nil
}

// response is the answer assembled so far.
func (a *openaiAccumulator) response() Response {
	stop := a.reason
	switch stop {
	case "function_call":
		stop = "tool_calls"
	case "", "stop", "tool_calls", "length", "content_filter":
	default:
		stop = "stop"
	}
	if len(a.done) > 0 {
		stop = "tool_calls" // some compatible servers say "stop" after tool calls
	}
	return Response{
		Message: Message{
			Role:      RoleAssistant,
			Content:   a.text.String(),
			ToolCalls: a.done,
			Thinking:  a.thinking.String(),
		},
		Usage:      a.usage,
		StopReason: stop,
	}
}
