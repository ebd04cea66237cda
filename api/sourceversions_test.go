package api_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/bundle"
	"svc/migrations/dbtest"
	"svc/registry"
)

type sourceVersionAnswer struct {
	SourceVersionID string `json:"sourceVersionId"`
	Digest          string `json:"digest"`
	Size            int64  `json:"size"`
}

func TestSourceVersions(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		h := newHarness(t, db)
		agent := h.createAgent("hosted")
		path := "/api/agents/" + agent + "/source-versions"
		hello := fixtureFiles(t, "hello")

		// JSON files.
		var fromJSON sourceVersionAnswer
		h.call(http.MethodPost, path, h.admin, map[string]any{"files": hello}, http.StatusCreated, &fromJSON)
		if !strings.HasPrefix(fromJSON.Digest, "sha256:") || len(fromJSON.Digest) != 71 || fromJSON.SourceVersionID == "" {
			t.Fatalf("JSON upload = %+v", fromJSON)
		}

		// The same tree as tar.gz, in another order, with other times and modes: the same digest.
		names := make([]string, 0, len(hello))
		for name := range hello {
			names = append(names, name)
		}
		slices.Sort(names)
		slices.Reverse(names)
		rec := h.do(request{method: "POST", path: path, token: h.admin, body: tarGz(t, hello, names, time.Unix(1_000_000, 0)), contentType: "application/gzip"})
		if rec.Code != http.StatusCreated {
			t.Fatalf("tar.gz upload = %d %s", rec.Code, rec.Body.String())
		}
		var fromTar sourceVersionAnswer
		decode(t, rec, &fromTar)
		if fromTar.Digest != fromJSON.Digest || fromTar.SourceVersionID == fromJSON.SourceVersionID {
			t.Errorf("tar.gz upload = %+v, want digest %s and a new version id", fromTar, fromJSON.Digest)
		}

		// Another tree gives another digest.
		changed := map[string]string{}
		for k, v := range hello {
			changed[k] = v
		}
		changed["agents/default/AGENT.md"] += "\nOne more line.\n"
		var other sourceVersionAnswer
		h.call(http.MethodPost, path, h.admin, map[string]any{"files": changed}, http.StatusCreated, &other)
		if other.Digest == fromJSON.Digest {
			t.Error("a changed tree has the same digest")
		}

		// What is stored is the tree, readable back with the same digest; the newest is the last one.
		versions := registry.NewSourceVersions(db, h.objects)
		newest, err := versions.Newest(context.Background(), agent)
		if err != nil || newest.ID != other.SourceVersionID {
			t.Fatalf("Newest = %+v, %v; want %s", newest, err, other.SourceVersionID)
		}
		rc, sv, err := versions.Open(context.Background(), agent, fromTar.SourceVersionID)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close() //nolint:errcheck // read-only
		tree, err := bundle.ReadTarGz(rc, bundle.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if d, err := bundle.Digest(tree); err != nil || d != fromJSON.Digest || sv.ObjectKey != "sources/"+agent+"/"+fromTar.SourceVersionID+".tar.gz" {
			t.Errorf("stored archive digest %s (%v) key %s; want %s", d, err, sv.ObjectKey, fromJSON.Digest)
		}

		// support-desk loads too.
		h.call(http.MethodPost, path, h.admin, map[string]any{"files": fixtureFiles(t, "support-desk")}, http.StatusCreated, nil)
	})
}

func TestBrokenSourceListsEveryProblem(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		h := newHarness(t, db)
		agent := h.createAgent("broken")
		path := "/api/agents/" + agent + "/source-versions"
		broken := fixtureFiles(t, "broken")
		delete(broken, "README.md")

		for _, r := range []request{
			{method: "POST", path: path, token: h.admin, body: map[string]any{"files": broken}},
			{method: "POST", path: path, token: h.admin, body: tarGz(t, broken, nil, time.Now()), contentType: "application/gzip"},
		} {
			rec := h.do(r)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("broken upload = %d %s, want 400", rec.Code, rec.Body.String())
			}
			e := errorOf(t, rec)
			if e.Error.Code != "INVALID_SOURCE" {
				t.Errorf("code = %s, want INVALID_SOURCE", e.Error.Code)
			}
			var all []string
			for _, p := range e.Error.Problems {
				all = append(all, p.File+":"+p.Message)
			}
			joined := strings.Join(all, "\n")
			// The problems the fixture's README lists, each with its file.
			for _, want := range []struct{ file, text string }{
				{"svc.json", "version"},
				{"svc.json", "colour"},
				{"agents/default/agent.json", "no_such_tool"},
				{"agents/default/agent.json", "missing-skill"},
				{"agents/default/agent.json", "nope"},
				{"agents/default/agent.json", "ghost"},
				{"svc/skills/x/SKILL.md", ""},
				{"svc/tools/bad/tool.json", "undeclared_child"},
				{"svc/tools/bad/tool.json", "nobody"},
				{"svc/tools/bad/handler.ts", ""},
			} {
				found := false
				for _, p := range e.Error.Problems {
					if p.File == want.file && strings.Contains(p.Message, want.text) {
						found = true
					}
				}
				if !found {
					t.Errorf("no problem in %s mentioning %q; problems:\n%s", want.file, want.text, joined)
				}
			}
			for _, p := range e.Error.Problems {
				if p.File == "svc/tools/bad/handler.ts" && p.Line != 2 {
					t.Errorf("handler.ts problem at line %d, want 2: %s", p.Line, p.Message)
				}
			}
		}
		// Nothing was stored.
		if _, err := registry.NewSourceVersions(db, h.objects).Newest(context.Background(), agent); err == nil {
			t.Error("a broken tree was recorded")
		}
		if left, err := h.objects.List(context.Background(), "sources/"); err != nil || len(left) != 0 {
			t.Errorf("objects after broken uploads: %v, %v", left, err)
		}
	})
}

func TestSourceVersionBadBodies(t *testing.T) {
	h := newHarness(t, dbtest.SQLite(t))
	path := "/api/agents/" + h.createAgent("bad") + "/source-versions"
	escape := tarEntries(t, []*tar.Header{{Typeflag: tar.TypeReg, Name: "../evil.txt", Size: 1}}, "x")
	tests := []struct {
		name   string
		r      request
		status int
		code   string
	}{
		{"not gzip", request{body: []byte("plain text"), contentType: "application/gzip"}, 400, "INVALID_REQUEST"},
		{"empty gzip body", request{body: []byte{}, contentType: "application/gzip"}, 400, "INVALID_REQUEST"},
		{"path escapes", request{body: escape, contentType: "application/gzip"}, 400, "INVALID_SOURCE"},
		{"no files", request{body: map[string]any{"files": map[string]string{}}}, 400, "INVALID_REQUEST"},
		{"absolute path", request{body: map[string]any{"files": map[string]string{"/etc/passwd": "x"}}}, 400, "INVALID_SOURCE"},
		{"file over 5 MB", request{body: map[string]any{"files": map[string]string{"svc.json": `{"name":"a","version":"1"}`, "big.md": strings.Repeat("x", 5<<20+1)}}}, 400, "INVALID_SOURCE"},
		{"zip", request{body: []byte("PK"), contentType: "application/zip"}, 415, "UNSUPPORTED_MEDIA_TYPE"},
	}
	for _, tt := range tests {
		tt.r.method, tt.r.path, tt.r.token = "POST", path, h.admin
		rec := h.do(tt.r)
		if rec.Code != tt.status || errorOf(t, rec).Error.Code != tt.code {
			t.Errorf("%s = %d %s, want %d %s", tt.name, rec.Code, rec.Body.String(), tt.status, tt.code)
		}
	}
}

// tarEntries writes headers (with content for regular files) into a tar.gz.
func tarEntries(t *testing.T, hdrs []*tar.Header, content string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, hdr := range hdrs {
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(content[:hdr.Size])); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
