package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Role is the author of a message.
type Role string

// Roles of a conversation.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one message of the conversation sent to a model. The system prompt travels in Request.System.
type Message struct {
	Role    Role   `json:"role"`
	Content string `json:"content,omitempty"`
	// Parts are extra user content (images, files) sent after Content.
	Parts []Part `json:"parts,omitempty"`
	// ToolCalls are the calls an assistant message requested.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID and ToolName identify the call a RoleTool message answers; IsError marks a failed call.
	ToolCallID string `json:"tool_call_id,omitempty"`
	ToolName   string `json:"tool_name,omitempty"`
	IsError    bool   `json:"is_error,omitempty"`
	// Thinking is reasoning text an assistant message carried (kept for providers that need it back).
	Thinking string `json:"thinking,omitempty"`
	// ThinkingSignature is the provider's signature of Thinking (Anthropic needs it to accept the
	// thinking back in a tool loop). A message whose Thinking has no signature sends no thinking back.
	ThinkingSignature string `json:"thinking_signature,omitempty"`
}

// Part is a non-text piece of a user message.
type Part struct {
	MimeType string `json:"mime_type"`
	// Data is the content. A part kept in history has none: Ref names its content instead.
	Data     []byte `json:"data,omitempty"`
	Filename string `json:"filename,omitempty"`
	// Ref is "sha256:<hex>" of the content, which a session's history keeps apart from its rows
	// (sessions.Blobs); Size is the content's length in bytes.
	Ref  string `json:"ref,omitempty"`
	Size int    `json:"size,omitempty"`
}

// ToolCall is one tool invocation requested by the model. Arguments is a JSON object.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolSpec describes a tool offered to the model. Parameters is a JSON Schema object.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Request is one model call.
type Request struct {
	Model     string
	System    string
	Messages  []Message
	Tools     []ToolSpec
	MaxTokens int    // 0: the provider's default
	Effort    string // reasoning effort hint: low | medium | high, or ""
}

// Usage counts tokens of one model call. InputTokens counts every prompt token, cached or not;
// CachedTokens is the part of InputTokens read from the provider's prompt cache.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	CachedTokens int `json:"cached_tokens"`
}

// Total is input plus output tokens.
func (u Usage) Total() int { return u.InputTokens + u.OutputTokens }

// Add returns the sum of two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{u.InputTokens + o.InputTokens, u.OutputTokens + o.OutputTokens, u.CachedTokens + o.CachedTokens}
}

// EventType is the kind of a streamed model event.
type EventType int

// Stream events, in the order a provider may emit them.
const (
	EventTextDelta     EventType = iota + 1 // Text holds the next piece of answer text
	EventThinkingDelta                      // Text holds the next piece of reasoning
	EventToolCall                           // ToolCall holds one complete call (arguments fully assembled)
)

// Event is one streamed piece of a model's answer.
type Event struct {
	Type     EventType
	Text     string
	ToolCall *ToolCall
}

// Response is the whole answer of one model call.
type Response struct {
	// Message is the assistant message: Content is the whole text, ToolCalls every requested call.
	Message Message
	Usage   Usage
	// StopReason is the provider's reason, normalised: "stop", "tool_calls", "length" or "content_filter".
	StopReason string
}

// Provider calls one model API.
//
// Stream sends req and calls emit for every event in order, on the calling goroutine, as the
// provider produces them; it returns when the answer is complete. An error from emit stops the
// call and is returned as is. When ctx is cancelled Stream returns promptly with an error that
// wraps ctx's cause. Errors of the API itself are *APIError. Implementations retry 429 and 5xx
// answers with backoff before the first event was emitted, and are safe for concurrent use.
type Provider interface {
	Stream(ctx context.Context, req Request, emit func(Event) error) (Response, error)
}

// APIError is an error answer of a model API after retries.
type APIError struct {
	Provider   string
	StatusCode int // 0 when no HTTP answer was received
	Message    string
	Retryable  bool
	// RetryAfter is the wait the API asked for (Retry-After), or 0.
	RetryAfter time.Duration
}

// Error implements error: "<provider>: HTTP <status>: <message>", or "<provider>: <message>"
// without a status.
func (e *APIError) Error() string {
	if e.StatusCode == 0 {
		return e.Provider + ": " + e.Message
	}
	return e.Provider + ": HTTP " + strconv.Itoa(e.StatusCode) + ": " + e.Message
}

// ErrUnknownProvider is returned by New for a provider name it does not know.
var ErrUnknownProvider = errors.New("models: unknown provider")

// ErrBadRequest is wrapped by errors about a Request a provider cannot send (an unknown effort,
// an unsupported attachment type, no model); it is returned before any HTTP call.
var ErrBadRequest = errors.New("models: bad request")

// Provider names accepted by New.
const (
	ProviderOpenAI           = "openai"
	ProviderAnthropic        = "anthropic"
	ProviderOpenAICompatible = "openai-compatible"
	ProviderEcho             = "echo"
)

// Config selects and configures one provider. APIKey and BaseURL are final values (any env:
// reference was resolved by the caller). Model and Effort are the defaults of requests that
// leave them empty.
type Config struct {
	Provider string
	Model    string
	BaseURL  string
	APIKey   string
	Effort   string
}

// New returns the provider cfg names. httpClient carries the model API calls; nil means a
// client with the default transport and no timeout (streams can be long; bound them with ctx).
// An unknown provider is an error wrapping ErrUnknownProvider; openai-compatible requires BaseURL.
func New(cfg Config, httpClient *http.Client) (Provider, error) {
	if err := checkEffort(cfg.Effort); err != nil {
		return nil, fmt.Errorf("models: config effort: %w", err)
	}
	switch cfg.Provider {
	case ProviderOpenAI:
		return NewOpenAI(OpenAIConfig{
			APIKey: cfg.APIKey, BaseURL: cfg.BaseURL, HTTPClient: httpClient,
			Model: cfg.Model, Effort: cfg.Effort,
		}), nil
	case ProviderOpenAICompatible:
		if strings.TrimSpace(cfg.BaseURL) == "" {
			return nil, errors.New("models: provider openai-compatible requires baseUrl")
		}
		return NewOpenAI(OpenAIConfig{
			Name: ProviderOpenAICompatible, APIKey: cfg.APIKey, BaseURL: cfg.BaseURL, HTTPClient: httpClient,
			Model: cfg.Model, Effort: cfg.Effort, LegacyMaxTokens: true,
		}), nil
	case ProviderAnthropic:
		return NewAnthropic(AnthropicConfig{
			APIKey: cfg.APIKey, BaseURL: cfg.BaseURL, HTTPClient: httpClient,
			Model: cfg.Model, Effort: cfg.Effort,
		}), nil
	case ProviderEcho:
		return Echo{}, nil
	case "":
		return nil, fmt.Errorf("%w: provider is empty (want openai, anthropic, openai-compatible or echo)", ErrUnknownProvider)
	default:
		return nil, fmt.Errorf("%w %q (want openai, anthropic, openai-compatible or echo)", ErrUnknownProvider, cfg.Provider)
	}
}

// Efforts accepted in Request.Effort and Config.Effort, besides "".
const (
	EffortLow    = "low"
	EffortMedium = "medium"
	EffortHigh   = "high"
)

// checkEffort reports an effort that is not "", low, medium or high.
func checkEffort(effort string) error {
	switch effort {
	case "", EffortLow, EffortMedium, EffortHigh:
		return nil
	}
	return fmt.Errorf("%w: effort %q is not one of low, medium, high", ErrBadRequest, effort)
}

// DefaultContextWindow is what ContextWindow answers for a model it does not know.
const DefaultContextWindow = 128000

// ContextWindow returns the context window, in tokens, of a model, or DefaultContextWindow when
// the model is unknown. Anthropic models answer 200000 whatever their name; for the other
// providers the model name decides (an openai-compatible server serving "gpt-4o" gets 128000).
func ContextWindow(provider, model string) int {
	if provider == ProviderAnthropic {
		return 200000
	}
	// Model name prefixes and their context window; the longest matching prefix wins. Kept small
	// on purpose: it only has to be right enough for compaction.
	windows := [...]struct {
		prefix string
		tokens int
	}{
		{"gpt-5", 400000},
		{"gpt-4.1", 1047576},
		{"gpt-4o", 128000},
		{"gpt-4-turbo", 128000},
		{"gpt-4", 8192},
		{"gpt-3.5-turbo", 16385},
		{"o1-mini", 128000},
		{"o1", 200000},
		{"o3", 200000},
		{"o4-mini", 200000},
		{"claude-", 200000},
		{"deepseek-", 128000},
		{"gemini-", 1048576},
	}
	best, tokens := 0, DefaultContextWindow
	for _, w := range windows {
		if len(w.prefix) > best && strings.HasPrefix(model, w.prefix) {
			best, tokens = len(w.prefix), w.tokens
		}
	}
	return tokens
}
