package models

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
)

// maxEventLine bounds one line of an event stream (the SDK's scanner allows the same).
const maxEventLine = 32 << 20

// eventBufferSize is the buffer of an event stream's reader. Held for as long as the model
// streams (and while it thinks), so it is paid per open stream; a line longer than it is
// gathered in eventReader.long. A chunk's line is a few hundred bytes (longer ones, such as a
// tool call's arguments sent whole, take one more copy).
const eventBufferSize = 512

// errEventLine is the error of a line longer than maxEventLine.
var errEventLine = errors.New("event stream line too long")

// eventReader reads the data of server-sent events, the way the SDK's decoder does: data
// lines are joined, each followed by "\n"; an empty line dispatches; comments, event names
// and other fields are ignored; an event cut by the end of the body is dropped.
type eventReader struct {
	r    *bufio.Reader
	data []byte // the event being read; reused
	long []byte // a line longer than r's buffer; reused
}

// next returns the data of the next event, valid until the following call, or io.EOF.
func (e *eventReader) next() ([]byte, error) {
	e.data = e.data[:0]
	has := false
	for {
		line, err := e.line()
		if len(line) == 0 && err == nil {
			if has {
				return e.data, nil
			}
			continue
		}
		if len(line) > 0 {
			name, value, _ := bytes.Cut(line, []byte(":"))
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
			if string(name) == "data" {
				e.data = append(e.data, value...)
				e.data = append(e.data, '\n')
				has = true
			}
		}
		if err != nil {
			return nil, err
		}
	}
}

// line returns the next line without its end ("\n" or "\r\n"). At the end of the body it
// returns the last unterminated line, if any, with io.EOF.
func (e *eventReader) line() ([]byte, error) {
	line, err := e.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		e.long = append(e.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) && len(e.long) <= maxEventLine {
			line, err = e.r.ReadSlice('\n')
			e.long = append(e.long, line...)
		}
		if len(e.long) > maxEventLine {
			return nil, errEventLine
		}
		line = e.long
	}
	if err != nil && len(line) == 0 {
		return nil, err
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	if err != nil && len(line) == 0 {
		return nil, err
	}
	return line, err
}

// openaiChunk is the part of a chat.completion.chunk the provider reads.
type openaiChunk struct {
	Choices []openaiChoice `json:"choices"`
	Usage   *openaiUsage   `json:"usage"`
	// Error is set (even to null) when the event is an error event.
	Error json.RawMessage `json:"error"`
}

// openaiChoice is one choice of a chunk.
type openaiChoice struct {
	Index        int         `json:"index"`
	Delta        openaiDelta `json:"delta"`
	FinishReason string      `json:"finish_reason"`
}

// openaiDelta is the new content of a choice.
type openaiDelta struct {
	Content string `json:"content"`
	Refusal string `json:"refusal"`
	// ReasoningContent is the reasoning of vLLM, DeepSeek and llama.cpp; Reasoning that of
	// Ollama and OpenRouter (a string; other shapes are ignored).
	ReasoningContent string                `json:"reasoning_content"`
	Reasoning        json.RawMessage       `json:"reasoning"`
	ToolCalls        []openaiToolCallDelta `json:"tool_calls"`
	// reasoning is Reasoning already decoded by decodeChunk's fast path.
	reasoning string
}

// thinking is the reasoning text of the delta.
func (d *openaiDelta) thinking() string {
	switch {
	case d.ReasoningContent != "":
		return d.ReasoningContent
	case d.reasoning != "":
		return d.reasoning
	case len(d.Reasoning) > 1 && d.Reasoning[0] == '"':
		var s string
		if json.Unmarshal(d.Reasoning, &s) == nil {
			return s
		}
	}
	return ""
}

// openaiUsage is the usage of a stream's last chunk.
type openaiUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
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

// errorEventMessage is the message of an error event: the API's error message, or the error
// member as sent.
func errorEventMessage(data []byte) (msg string, retryable bool) {
	var body struct {
		Error json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(data, &body) // a malformed event keeps its raw text below
	var e struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	}
	msg = "received error while streaming: " + string(bytes.TrimSpace(body.Error))
	if json.Unmarshal(body.Error, &e) == nil && e.Message != "" {
		msg = e.Message
	}
	kind := strings.ToLower(e.Type + " " + stringOf(e.Code))
	retryable = strings.Contains(kind, "server_error") || strings.Contains(kind, "rate_limit") ||
		strings.Contains(kind, "overloaded")
	return msg, retryable
}

// stringOf is a string or number code as text.
func stringOf(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return ""
}

// readErrorBody reads the message of an HTTP error answer ({"error":{"message":...}}), or ""
// when it has none.
func readErrorBody(r io.Reader) string {
	body, _ := io.ReadAll(io.LimitReader(r, 64<<10)) // a partial body still may hold the message
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &e) == nil {
		return cmp.Or(e.Error.Message, e.Message)
	}
	return ""
}
