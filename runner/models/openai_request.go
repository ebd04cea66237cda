package models

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"svc/runner/sse"
)

// appendOpenAIRequest appends the JSON body of a streamed Chat Completions request for req,
// with the same fields the official SDK sends for it. The body is built with appends rather
// than through the SDK's reflective encoder, which cost more than the rest of the request.
// model and effort are the request's, already defaulted and checked.
func (p *OpenAI) appendRequest(dst []byte, req *Request, model, effort string) ([]byte, error) {
	dst = append(dst, `{"model":`...)
	dst = sse.AppendString(dst, model)
	dst = append(dst, `,"stream":true,"stream_options":{"include_usage":true}`...)
	if effort != "" {
		dst = append(dst, `,"reasoning_effort":`...)
		dst = sse.AppendString(dst, effort)
	}
	if req.MaxTokens > 0 {
		if p.cfg.LegacyMaxTokens {
			dst = append(dst, `,"max_tokens":`...)
		} else {
			dst = append(dst, `,"max_completion_tokens":`...)
		}
		dst = strconv.AppendInt(dst, int64(req.MaxTokens), 10)
	}
	dst = append(dst, `,"messages":[`...)
	first := true
	if req.System != "" {
		dst = append(dst, `{"role":"system","content":`...)
		dst = sse.AppendString(dst, req.System)
		dst = append(dst, '}')
		first = false
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		if err := checkParts(i, m); err != nil {
			return dst, err
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		var err error
		if dst, err = appendOpenAIMessage(dst, i, m); err != nil {
			return dst, err
		}
	}
	dst = append(dst, ']')
	if len(req.Tools) > 0 {
		dst = append(dst, `,"tools":[`...)
		for i := range req.Tools {
			t := &req.Tools[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"type":"function","function":{"name":`...)
			if t.Name == "" {
				return dst, fmt.Errorf("%w: tools[%d]: name is empty", ErrBadRequest, i)
			}
			dst = sse.AppendString(dst, t.Name)
			if t.Description != "" {
				dst = append(dst, `,"description":`...)
				dst = sse.AppendString(dst, t.Description)
			}
			dst = append(dst, `,"parameters":`...)
			var err error
			if dst, err = appendSchema(dst, i, t); err != nil {
				return dst, err
			}
			dst = append(dst, `}}`...)
		}
		dst = append(dst, ']')
	}
	return append(dst, '}'), nil
}

// appendSchema appends the parameters of tool i, compacted; an empty schema is an object
// without properties.
func appendSchema(dst []byte, i int, t *ToolSpec) ([]byte, error) {
	if len(bytes.TrimSpace(t.Parameters)) == 0 {
		return append(dst, `{"type":"object","properties":{}}`...), nil
	}
	buf := bytes.NewBuffer(dst)
	start := len(dst)
	if err := json.Compact(buf, t.Parameters); err != nil || buf.Len() == start || buf.Bytes()[start] != '{' {
		return dst, fmt.Errorf("%w: tools[%d] (%s): parameters is not a JSON object", ErrBadRequest, i, t.Name)
	}
	return buf.Bytes(), nil
}

// appendOpenAIMessage appends message i.
func appendOpenAIMessage(dst []byte, i int, m *Message) ([]byte, error) {
	switch m.Role {
	case RoleUser:
		dst = append(dst, `{"role":"user","content":`...)
		if len(m.Parts) == 0 {
			dst = sse.AppendString(dst, m.Content)
			return append(dst, '}'), nil
		}
		dst = append(dst, '[')
		if m.Content != "" {
			dst = appendTextPart(dst, m.Content)
			dst = append(dst, ',')
		}
		for j := range m.Parts {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendOpenAIPart(dst, &m.Parts[j])
		}
		return append(dst, `]}`...), nil
	case RoleAssistant:
		dst = append(dst, `{"role":"assistant"`...)
		if m.Content != "" || len(m.ToolCalls) == 0 {
			dst = append(dst, `,"content":`...)
			dst = sse.AppendString(dst, m.Content)
		}
		if len(m.ToolCalls) > 0 {
			dst = append(dst, `,"tool_calls":[`...)
			for j := range m.ToolCalls {
				tc := &m.ToolCalls[j]
				if j > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, `{"id":`...)
				dst = sse.AppendString(dst, tc.ID)
				dst = append(dst, `,"type":"function","function":{"name":`...)
				dst = sse.AppendString(dst, tc.Name)
				dst = append(dst, `,"arguments":`...)
				dst = sse.AppendString(dst, string(toolArguments(string(tc.Arguments))))
				dst = append(dst, `}}`...)
			}
			dst = append(dst, ']')
		}
		return append(dst, '}'), nil
	case RoleTool:
		if m.ToolCallID == "" {
			return dst, fmt.Errorf("%w: messages[%d]: tool message has no tool_call_id", ErrBadRequest, i)
		}
		content := m.Content
		if m.IsError && !strings.HasPrefix(strings.ToLower(content), "error") {
			content = "Error: " + content // Chat Completions has no is_error flag
		}
		dst = append(dst, `{"role":"tool","tool_call_id":`...)
		dst = sse.AppendString(dst, m.ToolCallID)
		dst = append(dst, `,"content":`...)
		dst = sse.AppendString(dst, content)
		return append(dst, '}'), nil
	}
	return dst, fmt.Errorf("%w: messages[%d]: unknown role %q", ErrBadRequest, i, m.Role)
}

// appendTextPart appends a text content part.
func appendTextPart(dst []byte, text string) []byte {
	dst = append(dst, `{"type":"text","text":`...)
	dst = sse.AppendString(dst, text)
	return append(dst, '}')
}

// appendOpenAIPart appends a checked part: images as image_url data URIs, PDFs as file parts,
// text as a text part.
func appendOpenAIPart(dst []byte, p *Part) []byte {
	switch kindOf(p.MimeType) {
	case partImage:
		dst = append(dst, `{"type":"image_url","image_url":{"url":"`...)
		dst = appendDataURI(dst, p)
		return append(dst, `"}}`...)
	case partPDF:
		dst = append(dst, `{"type":"file","file":{"file_data":"`...)
		dst = appendDataURI(dst, p)
		dst = append(dst, `","filename":`...)
		dst = sse.AppendString(dst, cmp.Or(p.Filename, "document.pdf"))
		return append(dst, `}}`...)
	default:
		return appendTextPart(dst, textPart(p))
	}
}

// appendDataURI appends data:<type>;base64,<data>, without quotes: the media type is escaped
// for a JSON string and base64 needs no escaping.
func appendDataURI(dst []byte, p *Part) []byte {
	dst = append(dst, "data:"...)
	media := sse.AppendString(nil, mediaType(p.MimeType))
	dst = append(dst, media[1:len(media)-1]...)
	dst = append(dst, ";base64,"...)
	return base64.StdEncoding.AppendEncode(dst, p.Data)
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
