package connections

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"
)

// MaxBodyBytes bounds the body a result carries (CONTRACT §7: bodies over 64 KiB are cut with
// a marker). A body of exactly MaxBodyBytes is returned whole.
const MaxBodyBytes = 64 << 10

// maxReadBytes bounds how much of a response is read: past it the body is cut without being
// parsed, and its size is reported as "at least".
const maxReadBytes = 8 << 20

// returnedHeaders are the response headers a result carries: what helps the model read the
// body, follow a redirect or a created resource, page, and respect the API's own limits.
// Everything else is left out, and in particular Set-Cookie (a session the model must not
// hold), WWW-Authenticate and Proxy-Authenticate (auth details), and the server's identity.
var returnedHeaders = []string{
	"Content-Type", "Content-Language", "Content-Disposition",
	"Location", "Retry-After", "ETag", "Last-Modified", "Link",
	"X-Total-Count", "X-Request-Id",
	"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
	"RateLimit", "RateLimit-Policy", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset",
	"Deprecation", "Sunset",
}

// Response is the result of a request call (CONTRACT §7), as the model and the client's
// tool_call_result frame receive it.
type Response struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	// Body is the body: parsed when it is JSON (hidden fields removed), else text; a cut body
	// is text ending with a marker; nil for an empty, binary or withheld body.
	Body any `json:"body"`
	// Cut is set when the body was cut to MaxBodyBytes.
	Cut *Cut `json:"cut,omitempty"`
	// Note says why a body is missing (binary, or withheld because it could hide fields the
	// package cannot remove), or "".
	Note string `json:"note,omitempty"`
}

// Cut describes a body cut to MaxBodyBytes. Bytes is the size of the whole body the model
// would have got: for JSON, its compact encoding after hidden fields are removed; else the
// text as received. AtLeast marks a body too large to read whole (over 8 MiB), whose size is
// at least Bytes.
type Cut struct {
	Bytes   int64 `json:"bytes"`
	AtLeast bool  `json:"at_least,omitempty"`
	Kept    int   `json:"kept"`
}

// readResponse reads and shapes resp (closing nothing: the caller closes the body).
func readResponse(resp *http.Response, h *hidden, red *redactor) (*Response, int64, error) {
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxReadBytes+1))
	if err != nil {
		return nil, int64(len(raw)), fmt.Errorf("read the response body: %w", err)
	}
	out := &Response{Status: resp.StatusCode, Headers: map[string]string{}}
	for _, k := range returnedHeaders {
		if vs := resp.Header.Values(k); len(vs) > 0 {
			out.Headers[k] = red.str(strings.Join(vs, ", "))
		}
	}
	complete := len(raw) <= maxReadBytes
	size := int64(len(raw))
	if !complete {
		raw = raw[:maxReadBytes]
		size = max(size, resp.ContentLength)
	}
	shapeBody(out, raw, size, complete, resp.Header.Get("Content-Type"), h, red)
	return out, size, nil
}

// shapeBody sets out.Body (and Cut or Note) from raw, the first bytes of a body of size bytes.
func shapeBody(out *Response, raw []byte, size int64, complete bool, contentType string, h *hidden, red *redactor) {
	if len(raw) == 0 {
		return
	}
	if looksJSON(raw, contentType) {
		if complete {
			if v, ok := decodeJSON(raw); ok {
				h.strip(v)
				v = red.tree(v)
				text := encodeJSON(v)
				if len(text) <= MaxBodyBytes {
					out.Body = v
					return
				}
				out.Body, out.Cut = cutText(string(text), int64(len(text)), false)
				return
			}
		} else if h != nil {
			out.Note = fmt.Sprintf("body withheld: JSON of more than %d bytes is too large to remove the fields access.json hides", maxReadBytes)
			return
		}
	}
	if !utf8.Valid(trimPartialRune(raw, complete)) {
		ct, _, _ := mime.ParseMediaType(contentType)
		out.Note = fmt.Sprintf("binary body not shown (%s, %s bytes)", cmp.Or(ct, "unknown type"), sizeText(size, complete))
		return
	}
	text := string(raw)
	if w, ok := h.mentions(text); ok {
		out.Note = fmt.Sprintf("body withheld: it is not JSON, so the fields access.json hides cannot be removed, and it mentions %q", w)
		return
	}
	text = red.str(text)
	if len(text) <= MaxBodyBytes && complete {
		out.Body = text
		return
	}
	out.Body, out.Cut = cutText(text, max(size, int64(len(text))), !complete)
}

// cutText keeps the first MaxBodyBytes of text (at a character boundary) and adds the marker.
func cutText(text string, size int64, atLeast bool) (string, *Cut) {
	kept := min(MaxBodyBytes, len(text))
	for kept > 0 && kept < len(text) && !utf8.RuneStart(text[kept]) {
		kept--
	}
	c := &Cut{Bytes: size, AtLeast: atLeast, Kept: kept}
	return text[:kept] + fmt.Sprintf("\n[svc: body cut to its first %d bytes of %s]", kept, sizeText(size, !atLeast)), c
}

func sizeText(size int64, exact bool) string {
	if exact {
		return fmt.Sprint(size)
	}
	return fmt.Sprintf("at least %d", size)
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of a body that was not read whole.
func trimPartialRune(b []byte, complete bool) []byte {
	if complete {
		return b
	}
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

// looksJSON reports whether a body is JSON: a JSON media type, or an untyped or text body
// that starts like an object or array (parsed only if it is valid).
func looksJSON(raw []byte, contentType string) bool {
	ct, _, _ := mime.ParseMediaType(contentType)
	if ct == "application/json" || strings.HasSuffix(ct, "+json") {
		return true
	}
	if ct != "" && ct != "text/plain" && ct != "application/octet-stream" {
		return false
	}
	t := bytes.TrimLeft(raw, " \t\r\n")
	return len(t) > 0 && (t[0] == '{' || t[0] == '[')
}

func decodeJSON(raw []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false // trailing data: not one JSON value
	}
	return v, true
}

// encodeJSON is the compact encoding of a decoded value, without HTML escaping (so that the
// size is the size the model reads).
func encodeJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // unreachable: decoded JSON and Response always encode
		return []byte("null")
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
