package registry_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/fstest"

	"gorm.io/gorm"

	"svc/migrations/dbtest"
	"svc/registry"
	"svc/registry/fsobjects"
)

func testObjects(t *testing.T) registry.Objects {
	t.Helper()
	o, err := fsobjects.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return registry.Checked(o)
}

// untar lists the entries of a tar.gz as "name=content".
func untar(t *testing.T, r io.Reader) []string {
	t.Helper()
	zr, err := gzip.NewReader(r)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var out []string
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, hdr.Name+"="+string(data))
	}
}

func TestPackTreeIsDeterministic(t *testing.T) {
	tree := fstest.MapFS{
		"svc.json":                {Data: []byte(`{"name":"x","version":"1"}`), Mode: 0o600},
		"agents/default/AGENT.md": {Data: []byte("# hi\n")},
		"a/b/c.txt":               {Data: []byte("c")},
	}
	var one, two bytes.Buffer
	if err := registry.PackTree(&one, tree); err != nil {
		t.Fatal(err)
	}
	if err := registry.PackTree(&two, tree); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(one.Bytes(), two.Bytes()) {
		t.Error("two packs of the same tree differ")
	}
	got := strings.Join(untar(t, &one), ";")
	want := `a/b/c.txt=c;agents/default/AGENT.md=# hi` + "\n" + `;svc.json={"name":"x","version":"1"}`
	if got != want {
		t.Errorf("PackTree entries = %q, want %q", got, want)
	}
}

func TestSourceVersions(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		objects := testObjects(t)
		s := registry.NewSourceVersions(db, objects)
		a := mustCreateAgent(t, db, "one")
		b := mustCreateAgent(t, db, "two")
		digest := "sha256:" + strings.Repeat("1", 64)
		tree := fstest.MapFS{"svc.json": {Data: []byte(`{"name":"x","version":"1"}`)}}

		if _, err := s.Newest(ctx, a.ID); !errors.Is(err, registry.ErrSourceVersionNotFound) {
			t.Fatalf("Newest before Create = %v, want ErrSourceVersionNotFound", err)
		}
		v1, err := s.Create(ctx, registry.NewSourceVersion{AgentID: a.ID, Digest: digest, CreatedBy: "tok1", Tree: tree})
		if err != nil {
			t.Fatal(err)
		}
		if v1.ObjectKey != "sources/"+a.ID+"/"+v1.ID+".tar.gz" || v1.Size <= 0 || v1.CreatedBy != "tok1" {
			t.Errorf("Create = %+v", v1)
		}
		info, err := objects.Stat(ctx, v1.ObjectKey)
		if err != nil || info.Size != v1.Size {
			t.Errorf("stored archive = %+v, %v; want %d bytes", info, err, v1.Size)
		}
		v2, err := s.Create(ctx, registry.NewSourceVersion{AgentID: a.ID, Digest: digest, Tree: tree})
		if err != nil {
			t.Fatal(err)
		}
		if v2.ID == v1.ID {
			t.Error("two versions share an id")
		}
		if n, err := s.Newest(ctx, a.ID); err != nil || n.ID != v2.ID {
			t.Errorf("Newest = %+v, %v; want %s", n, err, v2.ID)
		}
		if g, err := s.Get(ctx, a.ID, v1.ID); err != nil || g.Digest != digest || g.Size != v1.Size {
			t.Errorf("Get = %+v, %v", g, err)
		}
		if _, err := s.Get(ctx, b.ID, v1.ID); !errors.Is(err, registry.ErrSourceVersionNotFound) {
			t.Errorf("Get through another agent = %v, want ErrSourceVersionNotFound", err)
		}
		rc, sv, err := s.Open(ctx, a.ID, v1.ID)
		if err != nil {
			t.Fatal(err)
		}
		entries := untar(t, rc)
		if err := rc.Close(); err != nil {
			t.Fatal(err)
		}
		if sv.ID != v1.ID || len(entries) != 1 || entries[0] != `svc.json={"name":"x","version":"1"}` {
			t.Errorf("Open = %+v, entries %q", sv, entries)
		}

		// A failed record leaves no archive behind.
		if _, err := s.Create(ctx, registry.NewSourceVersion{AgentID: "anosuchagent", Digest: digest, Tree: tree}); !errors.Is(err, registry.ErrAgentNotFound) {
			t.Errorf("Create for a missing agent = %v, want ErrAgentNotFound", err)
		}
		if left, err := objects.List(ctx, "sources/anosuchagent/"); err != nil || len(left) != 0 {
			t.Errorf("archives left for a missing agent: %v, %v", left, err)
		}
		var ie *registry.InvalidError
		if _, err := s.Create(ctx, registry.NewSourceVersion{AgentID: a.ID, Digest: "sha256:xyz", Tree: tree}); !errors.As(err, &ie) || ie.Field != "digest" {
			t.Errorf("Create with a bad digest = %v, want an InvalidError for digest", err)
		}
		// An archive removed behind the record's back is ErrNotFound.
		if err := objects.Delete(ctx, v2.ObjectKey); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Open(ctx, a.ID, v2.ID); !errors.Is(err, registry.ErrNotFound) {
			t.Errorf("Open of a missing archive = %v, want ErrNotFound", err)
		}
	})
}
