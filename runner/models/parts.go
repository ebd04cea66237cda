package models

import (
	"encoding/json"
	"fmt"
	"mime"
	"strings"
)

// partKind is how a provider sends a Part.
type partKind int

const (
	partUnsupported partKind = iota
	partImage                // image/png, image/jpeg, image/gif, image/webp: an image block
	partPDF                  // application/pdf: a document or file block
	partText                 // text/*, JSON, XML, YAML: its UTF-8 text
)

// kindOf classifies a MIME type (parameters such as charset are ignored).
func kindOf(mimeType string) partKind {
	media, _, err := mime.ParseMediaType(mimeType)
	if err != nil {
		return partUnsupported
	}
	switch media {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return partImage
	case "application/pdf":
		return partPDF
	case "application/json", "application/xml", "application/yaml", "application/x-yaml":
		return partText
	}
	if strings.HasPrefix(media, "text/") {
		return partText
	}
	return partUnsupported
}

// mediaType is mimeType without its parameters, lower-cased.
func mediaType(mimeType string) string {
	media, _, err := mime.ParseMediaType(mimeType)
	if err != nil {
		return mimeType
	}
	return media
}

// checkParts validates the parts of message i: only user messages carry parts, and each part
// must be of a type the providers can send.
func checkParts(i int, m *Message) error {
	if len(m.Parts) == 0 {
		return nil
	}
	if m.Role != RoleUser {
		return fmt.Errorf("%w: messages[%d]: parts are only allowed on user messages, not %s", ErrBadRequest, i, m.Role)
	}
	for j := range m.Parts {
		p := &m.Parts[j]
		if kindOf(p.MimeType) == partUnsupported {
			return fmt.Errorf("%w: messages[%d].parts[%d] (%s): mime type %q is not supported (want an image png/jpeg/gif/webp, a PDF or text)",
				ErrBadRequest, i, j, p.Filename, p.MimeType)
		}
		if len(p.Data) == 0 {
			return fmt.Errorf("%w: messages[%d].parts[%d] (%s): data is empty", ErrBadRequest, i, j, p.Filename)
		}
	}
	return nil
}

// textPart renders a text attachment as prompt text, naming the file when it has a name.
func textPart(p *Part) string {
	if p.Filename == "" {
		return string(p.Data)
	}
	return "File " + p.Filename + ":\n" + string(p.Data)
}

// toolArguments turns streamed arguments into ToolCall.Arguments: "" becomes {}, and text that
// is not valid JSON becomes a JSON string holding it, so that the message still marshals and
// the tool's parameter validation reports the problem to the model.
func toolArguments(raw string) json.RawMessage {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(raw)) {
		return json.RawMessage(raw)
	}
	quoted, err := json.Marshal(raw)
	if err != nil { // unreachable: a string always marshals
		return json.RawMessage("{}")
	}
	return quoted
}

// isJSONObject reports whether raw holds a JSON object.
func isJSONObject(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return strings.HasPrefix(s, "{") && json.Valid(raw)
}
