package runtime

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"svc/runner/attachments"
	"svc/runner/models"
	"svc/runner/tools"
)

// Limits of the chat API (spec §8). A value at a limit is accepted; one more is a 400 (413 for
// the body).
const (
	MaxBodyBytes       = 50 << 20 // JSON request body
	MaxImages          = 5
	MaxMetadataKeys    = 50
	MaxMetadataKeyLen  = 64   // characters
	MaxMetadataValLen  = 1024 // characters
	MaxAttachmentChars = 28_000_000
	// Limits this runtime adds where the spec names none.
	MaxSessionIDLen = 128
	MaxScopeIDLen   = 256
	MaxTitleLen     = 200
	MaxQueuedLen    = 100_000 // characters of a queued message
	MaxModelNameLen = 200     // characters of a request's model.model
)

// chatRequest is the chat body of spec §2.5, plus the body of the AI SDK's useChat
// ({id, messages}) that /chat/ai-stream also accepts.
type chatRequest struct {
	// eval is set by RunTurn for an eval's turn; never from JSON.
	eval             *tools.EvalPolicy
	Message          *string           `json:"message"`
	SessionID        string            `json:"session_id"`
	ScopeID          string            `json:"scope_id"`
	Context          map[string]string `json:"context"`
	Metadata         map[string]string `json:"metadata"`
	Agent            string            `json:"agent"`
	Skill            string            `json:"skill"`
	DeployID         string            `json:"deploy_id"`
	Model            *modelChoice      `json:"model"`
	MaxSessionTokens *int64            `json:"max_session_tokens"`
	Images           []attachment      `json:"images"`
	Attachments      []attachment      `json:"attachments"`
	// OnDisconnect is what a client's leaving does to a streamed turn: "abort" (the default,
	// user_abort) or "continue" (the turn runs to its end and may be reattached).
	OnDisconnect string `json:"on_disconnect"`

	// useChat
	ID       string      `json:"id"`
	Messages []uiMessage `json:"messages"`
	Trigger  string      `json:"trigger"`
}

type modelChoice struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Effort   string `json:"effort"`
}

// attachment is an image or file: {mimeType, data (base64), filename?, delivery?}. An image
// may also be a data: URL string.
type attachment struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
	Filename string `json:"filename"`
	Delivery string `json:"delivery"`
}

// UnmarshalJSON accepts the object form, "mediaType" for "mimeType", and a data: URL string.
func (a *attachment) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		a.MimeType, a.Data = splitDataURL(s)
		return nil
	}
	var raw struct {
		MimeType  string `json:"mimeType"`
		MediaType string `json:"mediaType"`
		Data      string `json:"data"`
		Filename  string `json:"filename"`
		Delivery  string `json:"delivery"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*a = attachment{MimeType: raw.MimeType, Data: raw.Data, Filename: raw.Filename, Delivery: raw.Delivery}
	if a.MimeType == "" {
		a.MimeType = raw.MediaType
	}
	return nil
}

// splitDataURL splits "data:<type>;base64,<data>"; any other string is base64 data of an
// unknown type.
func splitDataURL(s string) (mimeType, data string) {
	rest, ok := strings.CutPrefix(s, "data:")
	if !ok {
		return "", s
	}
	head, data, ok := strings.Cut(rest, ",")
	if !ok {
		return "", s
	}
	return strings.TrimSuffix(head, ";base64"), data
}

// uiMessage is a message of the AI SDK's UIMessage shape.
type uiMessage struct {
	ID    string   `json:"id"`
	Role  string   `json:"role"`
	Parts []uiPart `json:"parts"`
}

type uiPart struct {
	Type      string `json:"type"`
	Text      string `json:"text"`
	MediaType string `json:"mediaType"`
	URL       string `json:"url"`
	Filename  string `json:"filename"`
}

// readJSON reads the body (at most MaxBodyBytes), which must be a JSON object, into v. Decode
// errors name the field, and no error names a Go type.
func readJSON(w http.ResponseWriter, r *http.Request, v any) error {
	if r.ContentLength > MaxBodyBytes {
		return apiErr(CodeTooLarge)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return apiErr(CodeTooLarge)
		}
		return invalid("body", "cannot read the request body: %v", err)
	}
	// Decode the first value, then require only white space after it. (json.Unmarshal would
	// scan a body padded to the limit twice.)
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return invalid("body", "a JSON object is required")
	}
	// Every body is an object: any other top-level value is refused here, by its JSON kind,
	// since the decoder's message for it names the Go type it was decoding into.
	if kind := topLevelKind(trimmed); kind != "" {
		return &APIError{Code: CodeInvalidRequest, Field: "body", Message: "the body must be a JSON object, got " + kind}
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	err = dec.Decode(v)
	if err == nil && len(bytes.TrimLeft(trimmed[dec.InputOffset():], " \t\r\n")) > 0 {
		return invalid("body", "unexpected data after the JSON object")
	}
	if err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "body"
			}
			return invalid(field, "must be %s, got JSON %s", jsonKind(te.Type.Kind().String()), te.Value)
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return invalid("body", "not valid JSON at byte %d: %v", se.Offset, err)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return invalid("body", "not valid JSON: the body ends before the JSON object does")
		}
		// No other decode error is expected; its text may name Go types, which a client has no
		// use for.
		return invalid("body", "not a valid JSON object")
	}
	return nil
}

// topLevelKind returns the kind of the body's top-level JSON value ("an array", "a string", "a
// number", "a boolean", "null") when it is a well-formed value other than an object, and "" for
// an object or a body that does not start with a JSON value (the decoder reports that).
func topLevelKind(body []byte) string {
	if len(body) == 0 || body[0] == '{' {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // 1e400 is a number too
	tok, err := dec.Token()
	if err != nil {
		return ""
	}
	switch tok := tok.(type) {
	case json.Delim:
		if tok == '[' {
			return "an array"
		}
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return ""
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "map", "struct":
		return "an object"
	case "slice", "array":
		return "an array"
	case "int", "int64", "int32", "uint", "uint64", "float64":
		return "an integer"
	case "bool":
		return "a boolean"
	case "ptr":
		return "a value of another type"
	}
	return "a value of another type"
}

// input is a validated chat request: the user's message as model content.
type input struct {
	text     string
	parts    []models.Part
	kept     []models.Part      // parts as history keeps them: by reference (storeParts)
	warnings []string           // attachments left out
	files    []tools.Attachment // every attachment as sent, for the turn's tools
}

// fromUIMessages fills Message (and attachments) from a useChat body when Message is absent:
// the last user message's text parts, joined, and its file parts with data: URLs.
func (req *chatRequest) fromUIMessages() {
	if req.Message != nil || len(req.Messages) == 0 {
		return
	}
	if req.SessionID == "" {
		req.SessionID = req.ID
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != "user" {
			continue
		}
		var text []string
		for _, p := range m.Parts {
			switch p.Type {
			case "text":
				text = append(text, p.Text)
			case "file":
				mt, data := splitDataURL(p.URL)
				if mt == "" {
					mt = p.MediaType
				}
				req.Attachments = append(req.Attachments, attachment{MimeType: mt, Data: data, Filename: p.Filename})
			}
		}
		s := strings.Join(text, "\n")
		req.Message = &s
		return
	}
}

// validate checks req against the limits of spec §8 and turns it into model input.
func (req *chatRequest) validate() (*input, error) {
	if req.Message == nil && len(req.Images) == 0 && len(req.Attachments) == 0 {
		return nil, invalid("message", "is required")
	}
	in := &input{}
	if req.Message != nil {
		in.text = *req.Message
	}
	if strings.TrimSpace(in.text) == "" && len(req.Images) == 0 && len(req.Attachments) == 0 {
		return nil, invalid("message", "must not be empty unless images or attachments are supplied")
	}
	if err := checkSessionID("session_id", req.SessionID); err != nil {
		return nil, err
	}
	if err := checkOnDisconnect(req.OnDisconnect); err != nil {
		return nil, err
	}
	if err := checkCommon(req.ScopeID, req.Metadata, req.Model, req.MaxSessionTokens); err != nil {
		return nil, err
	}
	if len(req.Images) > MaxImages {
		return nil, invalid("images", "at most %d images per request, got %d", MaxImages, len(req.Images))
	}
	for i, img := range req.Images {
		field := "images[" + strconv.Itoa(i) + "]"
		mt := mediaType(img.MimeType)
		if mt == "" {
			return nil, invalid(field+".mimeType", "is required (image/png, image/jpeg, image/gif or image/webp)")
		}
		if !isImage(mt) {
			return nil, invalid(field+".mimeType", "%q is not an image type (image/png, image/jpeg, image/gif or image/webp)", img.MimeType)
		}
		data, err := decodeData(field, img.Data)
		if err != nil {
			return nil, err
		}
		in.parts = append(in.parts, models.Part{MimeType: mt, Data: data, Filename: img.Filename})
	}
	var manifest []string
	var imageBudget attachments.Budget // embedded images across all attachments (spec §8)
	for i, att := range req.Attachments {
		field := "attachments[" + strconv.Itoa(i) + "]"
		mt := mediaType(att.MimeType)
		if mt == "" {
			return nil, invalid(field+".mimeType", "is required")
		}
		switch att.Delivery {
		case "", "inline", "context":
		default:
			return nil, invalid(field+".delivery", "must be inline or context, got %q", att.Delivery)
		}
		kind := attachmentKind(mt)
		if kind == kindUnsupported {
			return nil, invalid(field+".mimeType", "%q is not supported (PDF, plain text, Markdown, CSV, PNG, JPEG, GIF, WebP, Office Open XML, OpenDocument, RTF)", att.MimeType)
		}
		data, err := decodeData(field, att.Data)
		if err != nil {
			return nil, err
		}
		name := att.Filename
		if name == "" {
			name = "attachment " + strconv.Itoa(i+1)
		}
		delivery := att.Delivery
		if delivery == "" {
			delivery = "inline"
		}
		in.files = append(in.files, tools.Attachment{Filename: name, MimeType: mt, Delivery: delivery, Data: data})
		if kind == kindConverted && att.Delivery != "context" {
			parts, warnings, err := convertedParts(name, mt, data, &imageBudget)
			if err != nil {
				return nil, invalid(field+".data", "%v", err)
			}
			in.parts = append(in.parts, parts...)
			in.warnings = append(in.warnings, warnings...)
			continue
		}
		if att.Delivery == "context" {
			manifest = append(manifest, "- "+name+" ("+mt+", "+strconv.Itoa(len(data))+" bytes)")
			continue
		}
		in.parts = append(in.parts, models.Part{MimeType: mt, Data: data, Filename: att.Filename})
	}
	if len(manifest) > 0 {
		if in.text != "" {
			in.text += "\n\n"
		}
		in.text += "Attached files (available to tools, not shown here):\n" + strings.Join(manifest, "\n")
	}
	return in, nil
}

// convertedParts converts an Office, OpenDocument or RTF file to what a model takes: its text,
// then its embedded images (within budget), with a warning for each medium left out.
func convertedParts(name, mt string, data []byte, budget *attachments.Budget) ([]models.Part, []string, error) {
	conv, err := attachments.Convert(name, mt, data, budget)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot convert %s (%s) to text: %w", name, mt, err)
	}
	parts := []models.Part{{MimeType: "text/plain", Data: []byte(conv.Text), Filename: name}}
	for _, img := range conv.Images {
		parts = append(parts, models.Part{MimeType: img.MimeType, Data: img.Data, Filename: img.Name})
	}
	var warnings []string
	for _, l := range conv.LeftOut {
		warnings = append(warnings, "attachment "+l.Name+" was left out: "+l.Reason)
	}
	return parts, warnings, nil
}

// checkCommon validates the fields shared by chat and POST /sessions.
func checkCommon(scopeID string, metadata map[string]string, model *modelChoice, maxTokens *int64) error {
	if utf8.RuneCountInString(scopeID) > MaxScopeIDLen {
		return invalid("scope_id", "at most %d characters", MaxScopeIDLen)
	}
	if err := checkMetadata("metadata", metadata); err != nil {
		return err
	}
	if model != nil {
		switch model.Provider {
		case models.ProviderOpenAI, models.ProviderAnthropic, models.ProviderOpenAICompatible, models.ProviderEcho:
		case "":
			return invalid("model.provider", "is required (openai, anthropic, openai-compatible or echo)")
		default:
			return invalid("model.provider", "must be openai, anthropic, openai-compatible or echo, got %q", model.Provider)
		}
		if model.Model == "" && model.Provider != models.ProviderEcho {
			return invalid("model.model", "is required")
		}
		if utf8.RuneCountInString(model.Model) > MaxModelNameLen {
			return invalid("model.model", "at most %d characters", MaxModelNameLen)
		}
		switch model.Effort {
		case "", models.EffortLow, models.EffortMedium, models.EffortHigh:
		default:
			return invalid("model.effort", "must be low, medium or high, got %q", model.Effort)
		}
	}
	if maxTokens != nil && *maxTokens <= 0 {
		return invalid("max_session_tokens", "must be a positive integer, got %d", *maxTokens)
	}
	return nil
}

// checkMetadata applies the metadata limits of spec §8.
func checkMetadata(field string, m map[string]string) error {
	if len(m) > MaxMetadataKeys {
		return invalid(field, "at most %d keys, got %d", MaxMetadataKeys, len(m))
	}
	for k, v := range m {
		if k == "" {
			return invalid(field, "keys must not be empty")
		}
		if n := utf8.RuneCountInString(k); n > MaxMetadataKeyLen {
			return invalid(field, "key %.70q is %d characters long; at most %d", k, n, MaxMetadataKeyLen)
		}
		if n := utf8.RuneCountInString(v); n > MaxMetadataValLen {
			return invalid(field, "value of key %q is %d characters long; at most %d", k, n, MaxMetadataValLen)
		}
	}
	return nil
}

func checkSessionID(field, id string) error {
	if id == "" {
		return nil
	}
	if len(id) > MaxSessionIDLen {
		return invalid(field, "at most %d characters", MaxSessionIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return invalid(field, "may hold only letters, digits and - _ . :")
		}
	}
	return nil
}

// decodeData checks the base64 size limit before decoding.
func decodeData(field, data string) ([]byte, error) {
	if len(data) > MaxAttachmentChars {
		return nil, invalid(field+".data", "%d characters of base64; at most %d per file", len(data), MaxAttachmentChars)
	}
	if data == "" {
		return nil, invalid(field+".data", "is required (base64, without a data: prefix)")
	}
	if strings.HasPrefix(data, "data:") {
		return nil, invalid(field+".data", "must be plain base64 without a data: URL prefix")
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		if b2, err2 := base64.RawStdEncoding.DecodeString(data); err2 == nil {
			return b2, nil
		}
		return nil, invalid(field+".data", "is not valid base64: %v", err)
	}
	return b, nil
}

func mediaType(s string) string {
	if s == "" {
		return ""
	}
	mt, _, err := mime.ParseMediaType(s)
	if err != nil {
		return strings.ToLower(strings.TrimSpace(s))
	}
	return mt
}

func isImage(mt string) bool {
	switch mt {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}

type attKind int

const (
	kindUnsupported attKind = iota
	kindDirect              // sent to the model as is
	kindConverted           // converted to text at ingestion (not available yet)
)

func attachmentKind(mt string) attKind {
	switch {
	case isImage(mt), mt == "application/pdf", mt == "text/plain", mt == "text/markdown", mt == "text/x-markdown", mt == "text/csv":
		return kindDirect
	case strings.HasPrefix(mt, "application/vnd.openxmlformats-officedocument."),
		strings.HasPrefix(mt, "application/vnd.oasis.opendocument."),
		mt == "application/rtf", mt == "text/rtf":
		return kindConverted
	}
	return kindUnsupported
}
