package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"svc/errcode"

	"github.com/gin-gonic/gin"
)

// mediaType returns the request's media type, lower-cased and without parameters ("" when none).
func mediaType(c *gin.Context) (string, error) {
	ct := c.GetHeader("Content-Type")
	if ct == "" {
		return "", nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return "", Errorf(errcode.UnsupportedMediaType, "the Content-Type header is malformed")
	}
	return strings.ToLower(mt), nil
}

// bindJSON decodes the request body into v strictly: the Content-Type must be JSON (or absent),
// the body one JSON object, every field known and of the right type. Each failure is an error
// naming the field or the byte offset; a body over MaxBodyBytes is PAYLOAD_TOO_LARGE.
func bindJSON(c *gin.Context, v any) error {
	data, err := readJSONBody(c, "a JSON object")
	if err != nil {
		return err
	}
	data = bytes.TrimRight(data, " \t\r\n")
	if len(data) == 0 {
		return Errorf(errcode.InvalidRequest, "the request body is empty; send a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, v)
	}
	// One value only: anything after it is an error.
	if dec.More() || dec.InputOffset() != int64(len(data)) {
		return Errorf(errcode.InvalidRequest, "the request body must hold exactly one JSON object")
	}
	return nil
}

// readJSONBody reads the whole (bounded) body of a JSON request: the Content-Type must be JSON
// (or absent) and the body not empty ("send <what>"); a body over the limit is a 413 whatever
// it holds.
func readJSONBody(c *gin.Context, what string) ([]byte, error) {
	mt, err := mediaType(c)
	if err != nil {
		return nil, err
	}
	if mt != "" && mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		return nil, Errorf(errcode.UnsupportedMediaType, "Content-Type must be application/json, not %s", mt)
	}
	if c.Request.Body == nil || c.Request.Body == http.NoBody {
		return nil, Errorf(errcode.InvalidRequest, "the request body is empty; send %s", what)
	}
	data, err := io.ReadAll(c.Request.Body)
	if err != nil {
		var maxBytes *http.MaxBytesError
		if errors.As(err, &maxBytes) {
			return nil, err
		}
		return nil, Errorf(errcode.InvalidRequest, "the request body could not be read")
	}
	return data, nil
}

// jsonError turns a decoding error into an API error that names the field; it never echoes a
// value (a secret sent as the wrong type must not come back in an error).
func jsonError(err error, v any) error {
	var maxBytes *http.MaxBytesError
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &maxBytes):
		return err
	case errors.Is(err, io.EOF):
		return Errorf(errcode.InvalidRequest, "the request body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return Errorf(errcode.InvalidRequest, "the request body ends before its JSON does")
	case errors.As(err, &syntax):
		return Errorf(errcode.InvalidRequest, "the request body is not valid JSON (at byte %d)", syntax.Offset)
	case errors.As(err, &typ):
		// Value is "string", "bool", "number 12.5"...: keep the kind, never the literal.
		got, _, _ := strings.Cut(typ.Value, " ")
		if typ.Field == "" {
			return Errorf(errcode.InvalidRequest, "the request body must be a JSON %s, not %s", jsonTypeName(reflect.TypeOf(v)), got)
		}
		return InvalidField(typ.Field, "must be %s, not %s", withArticle(jsonTypeName(typ.Type)), got)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		field := strings.Trim(name, `"`)
		return InvalidField(field, "unknown field")
	}
	return Errorf(errcode.InvalidRequest, "the request body cannot be read as JSON")
}

// jsonTypeName names the JSON type a Go type decodes from.
func jsonTypeName(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "value"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	}
	return "value"
}

func withArticle(s string) string {
	if strings.IndexByte("aeiou", s[0]) >= 0 {
		return "an " + s
	}
	return "a " + s
}

// writeJSON writes v with status (without HTML escaping: this is an API, not a page).
func writeJSON(c *gin.Context, status int, v any) error {
	c.PureJSON(status, v)
	return nil
}
