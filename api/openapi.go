package api

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"svc/errcode"
)

// OpenAPI returns the OpenAPI 3.1 document of the registered routes. It is generated from the
// route table on every call, so it cannot fall behind the routes; request and response schemas
// are reflected from the DTO types (json tags; `doc` and `enum` tags add descriptions and enums).
func (a *API) OpenAPI() map[string]any {
	paths := map[string]any{}
	for _, r := range a.routes {
		p := OpenAPIPath(r.Path)
		item, _ := paths[p].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[p] = item
		}
		item[strings.ToLower(r.Method)] = operation(r)
	}
	codes := make([]string, 0, len(errcode.All()))
	for _, code := range errcode.All() {
		codes = append(codes, string(code))
	}
	errSchema := schemaOf(reflect.TypeFor[errorBody]())
	errSchema["properties"].(map[string]any)["error"].(map[string]any)["properties"].(map[string]any)["code"].(map[string]any)["enum"] = codes
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "svc platform API",
			"version":     "1",
			"description": "Agents, their sources and settings, tokens and deployments. Every call but the public ones sends `Authorization: Bearer pk_...`; errors are `{\"error\":{\"code\",\"message\"}}`.",
		},
		"paths": paths,
		"components": map[string]any{
			"securitySchemes": map[string]any{
				"bearer": map[string]any{"type": "http", "scheme": "bearer", "description": "a pk_ automation token"},
			},
			"schemas": map[string]any{"Error": errSchema},
		},
	}
}

// Document is the OpenAPI document of the platform's route table, built without a database: what
// every API serves at /api/openapi.json. `svc openapi` writes it to docs/openapi.json.
func Document() map[string]any {
	a := &API{}
	a.routes = a.routeTable()
	return a.OpenAPI()
}

// DocumentJSON is Document as indented JSON with a final newline, the bytes of docs/openapi.json.
func DocumentJSON() ([]byte, error) {
	b, err := json.MarshalIndent(Document(), "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// OpenAPIPath turns a gin path ("/api/agents/:id") into an OpenAPI one ("/api/agents/{id}").
func OpenAPIPath(ginPath string) string {
	segs := strings.Split(ginPath, "/")
	for i, s := range segs {
		if name, ok := strings.CutPrefix(s, ":"); ok {
			segs[i] = "{" + name + "}"
		} else if name, ok := strings.CutPrefix(s, "*"); ok {
			segs[i] = "{" + name + "}"
		}
	}
	return strings.Join(segs, "/")
}

func operation(r Route) map[string]any {
	op := map[string]any{
		"operationId": operationID(r),
		"summary":     r.Summary,
	}
	need := string(r.Need)
	if r.Need == "" {
		need = "public"
		op["security"] = []any{}
	} else {
		op["security"] = []any{map[string]any{"bearer": []any{}}}
		desc := "Needs a pk_ token of kind " + need + " or higher."
		if r.Agent {
			desc = "Needs a pk_ token of kind " + need + " or higher, bound to this agent or unbound."
		}
		op["description"] = desc
	}
	op["x-svc-token-kind"] = need

	var params []any
	for _, s := range strings.Split(r.Path, "/") {
		if name, ok := strings.CutPrefix(s, ":"); ok {
			p := map[string]any{"name": name, "in": "path", "required": true, "schema": map[string]any{"type": "string"}}
			if name == "id" && r.Agent {
				p["description"] = "the agent's id or its slug"
			}
			params = append(params, p)
		}
	}
	for _, q := range r.Query {
		typ := q.Type
		if typ == "" {
			typ = "string"
		}
		params = append(params, map[string]any{"name": q.Name, "in": "query", "required": false, "description": q.Doc,
			"schema": map[string]any{"type": typ}})
	}
	if params != nil {
		op["parameters"] = params
	}

	hasBody := r.Request != nil || len(r.RequestTypes) > 0
	if hasBody {
		content := map[string]any{}
		if r.Request != nil {
			content["application/json"] = map[string]any{"schema": schemaOf(reflect.TypeOf(r.Request))}
		}
		for _, mt := range r.RequestTypes {
			content[mt] = map[string]any{}
		}
		op["requestBody"] = map[string]any{"required": true, "content": content}
	}

	status := r.Status
	if status == 0 {
		status = http.StatusOK
	}
	success := map[string]any{"description": http.StatusText(status)}
	switch {
	case r.Response != nil:
		success["content"] = map[string]any{"application/json": map[string]any{"schema": schemaOf(reflect.TypeOf(r.Response))}}
	case r.ResponseType != "":
		success["content"] = map[string]any{r.ResponseType: map[string]any{}}
	}
	responses := map[string]any{strconv.Itoa(status): success}
	for _, code := range routeErrors(r, hasBody, params != nil) {
		key := strconv.Itoa(code.Status())
		resp, _ := responses[key].(map[string]any)
		if resp == nil {
			resp = map[string]any{
				"description": "",
				"content":     map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}},
			}
			responses[key] = resp
		}
		if d := resp["description"].(string); d == "" {
			resp["description"] = string(code)
		} else {
			resp["description"] = d + ", " + string(code)
		}
	}
	op["responses"] = responses
	return op
}

// routeErrors lists the error codes a route can answer with.
func routeErrors(r Route, hasBody, hasParams bool) []errcode.Code {
	var codes []errcode.Code
	if hasBody || hasParams {
		codes = append(codes, errcode.InvalidRequest)
	}
	if r.Need != "" {
		codes = append(codes, errcode.Unauthenticated, errcode.Forbidden)
	}
	if r.Agent || hasParams {
		codes = append(codes, errcode.NotFound)
	}
	if hasBody {
		codes = append(codes, errcode.PayloadTooLarge, errcode.UnsupportedMediaType)
	}
	codes = append(codes, r.Errors...)
	codes = append(codes, errcode.Internal)
	return codes
}

func operationID(r Route) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(r.Method))
	for _, s := range strings.Split(strings.TrimPrefix(r.Path, "/"), "/") {
		s = strings.TrimLeft(s, ":*")
		for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == '-' || r == '.' || r == '_' }) {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

var timeType = reflect.TypeFor[time.Time]()

// schemaOf returns the JSON Schema (2020-12, as OpenAPI 3.1 uses) of a DTO type, following
// encoding/json's rules: json tag names, omitempty fields optional, pointers nullable.
func schemaOf(t reflect.Type) map[string]any {
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t.Kind() == reflect.Pointer:
		s := schemaOf(t.Elem())
		if typ, ok := s["type"].(string); ok {
			s["type"] = []any{typ, "null"}
		}
		return s
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": schemaOf(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem())}
	case reflect.Struct:
		return structSchema(t)
	}
	return map[string]any{}
}

func structSchema(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s := schemaOf(f.Type)
		if d := f.Tag.Get("doc"); d != "" {
			s["description"] = d
		}
		if e := f.Tag.Get("enum"); e != "" {
			var vals []any
			for _, v := range strings.Split(e, ",") {
				vals = append(vals, v)
			}
			s["enum"] = vals
		}
		props[name] = s
		if !slices.Contains(strings.Split(opts, ","), "omitempty") {
			required = append(required, name)
		}
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if required != nil {
		s["required"] = required
	}
	return s
}
