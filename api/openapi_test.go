package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/google/go-cmp/cmp"

	"svc/agent/agenttest"
	"svc/api"
	"svc/migrations/dbtest"
)

// TestOpenAPICoversEveryRoute walks gin's routes and the served document both ways: a route gin
// serves that the document lacks, or a documented operation gin does not serve, fails.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	h := newHarness(t, dbtest.SQLite(t))
	rec := h.do(request{method: "GET", path: "/api/openapi.json"})
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		t.Fatalf("GET /api/openapi.json = %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	var doc struct {
		OpenAPI    string                               `json:"openapi"`
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}

	engine, ok := h.handler.(*gin.Engine)
	if !ok {
		t.Fatalf("Handler() is a %T, want *gin.Engine", h.handler)
	}
	served := map[string]bool{}
	for _, r := range engine.Routes() {
		key := strings.ToLower(r.Method) + " " + api.OpenAPIPath(r.Path)
		served[key] = true
		if _, ok := doc.Paths[api.OpenAPIPath(r.Path)][strings.ToLower(r.Method)]; !ok {
			t.Errorf("gin serves %s %s, the OpenAPI document does not list it", r.Method, r.Path)
		}
	}
	var documented []string
	ids := map[string]bool{}
	for path, item := range doc.Paths {
		for method, op := range item {
			documented = append(documented, method+" "+path)
			if !served[method+" "+path] {
				t.Errorf("the OpenAPI document lists %s %s, gin does not serve it", method, path)
			}
			id, _ := op["operationId"].(string)
			if id == "" || ids[id] {
				t.Errorf("%s %s: operationId %q missing or repeated", method, path, id)
			}
			ids[id] = true
			if _, ok := op["responses"].(map[string]any); !ok {
				t.Errorf("%s %s has no responses", method, path)
			}
			if _, ok := op["security"]; !ok {
				t.Errorf("%s %s declares no security", method, path)
			}
			for _, p := range strings.Split(path, "/") {
				if strings.HasPrefix(p, "{") && !strings.Contains(string(mustJSON(t, op["parameters"])), `"name":"`+strings.Trim(p, "{}")+`"`) {
					t.Errorf("%s %s does not declare parameter %s", method, path, p)
				}
			}
		}
	}
	sort.Strings(documented)
	if len(documented) != len(served) {
		t.Errorf("%d documented operations, %d served:\n%s", len(documented), len(served), strings.Join(documented, "\n"))
	}
	if _, ok := doc.Components.Schemas["Error"]; !ok {
		t.Error("components.schemas.Error is missing")
	}
	// Every $ref points at a schema that exists.
	for _, ref := range strings.Split(rec.Body.String(), `"$ref":"`)[1:] {
		name := strings.TrimPrefix(ref[:strings.Index(ref, `"`)], "#/components/schemas/")
		if _, ok := doc.Components.Schemas[name]; !ok {
			t.Errorf("$ref to missing schema %q", name)
		}
	}
	// The token kinds in the document are the routes' (spec table 2.4).
	for _, r := range h.api.Routes() {
		want := string(r.Need)
		if want == "" {
			want = "public"
		}
		if got := doc.Paths[api.OpenAPIPath(r.Path)][strings.ToLower(r.Method)]["x-svc-token-kind"]; got != want {
			t.Errorf("%s %s: x-svc-token-kind %v, want %s", r.Method, r.Path, got, want)
		}
	}
}

// TestOpenAPIRequestSchemas checks a few reflected schemas against the DTOs they describe.
func TestOpenAPIRequestSchemas(t *testing.T) {
	h := newHarness(t, dbtest.SQLite(t))
	doc := h.api.OpenAPI()
	body := mustJSON(t, doc["paths"].(map[string]any)["/api/agents/{id}/source-versions"])
	for _, want := range []string{`"application/gzip"`, `"files"`, `"additionalProperties":{"type":"string"}`, `INVALID_SOURCE"`, `"sourceVersionId"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("source-versions operation lacks %s: %s", want, body)
		}
	}
	tokens := mustJSON(t, doc["paths"].(map[string]any)["/api/tokens"])
	for _, want := range []string{`"enum":["observer","operator","admin"]`, `"required":["name","kind"]`, `"type":["string","null"]`} {
		if !strings.Contains(string(tokens), want) {
			t.Errorf("tokens operation lacks %s: %s", want, tokens)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestOpenAPIFileIsCurrent keeps docs/openapi.json equal to the document the API serves, so the
// repository's copy cannot drift from the routes.
func TestOpenAPIFileIsCurrent(t *testing.T) {
	h := newHarness(t, dbtest.SQLite(t))
	served := h.do(request{method: "GET", path: "/api/openapi.json"}).Body.Bytes()
	want, err := api.DocumentJSON()
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if err := json.Unmarshal(served, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("served document and api.Document differ (-served +Document):\n%s", diff)
	}
	file := filepath.Join(agenttest.Root(t), "docs", "openapi.json")
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v: write it with `go run ./cmd/svc openapi -o docs/openapi.json`", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/openapi.json is not the current document: write it again with `go run ./cmd/svc openapi -o docs/openapi.json`")
	}
}
