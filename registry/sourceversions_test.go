package registry_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

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

func TestSourceVersions(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		objects := testObjects(t)
		s := registry.NewSourceVersions(db, objects)
		a := mustCreateAgent(t, db, "one")
		b := mustCreateAgent(t, db, "two")
		digest := "sha256:" + strings.Repeat("1", 64)
		archive := []byte("the bytes of a tar.gz, kept as they are")

		if _, err := s.Newest(ctx, a.ID); !errors.Is(err, registry.ErrSourceVersionNotFound) {
			t.Fatalf("Newest before Create = %v, want ErrSourceVersionNotFound", err)
		}
		v1, err := s.Create(ctx, registry.NewSourceVersion{AgentID: a.ID, Digest: digest, CreatedBy: "tok1", Archive: archive})
		if err != nil {
			t.Fatal(err)
		}
		if v1.ObjectKey != "sources/"+a.ID+"/"+v1.ID+".tar.gz" || v1.Size != int64(len(archive)) || v1.CreatedBy != "tok1" {
			t.Errorf("Create = %+v", v1)
		}
		info, err := objects.Stat(ctx, v1.ObjectKey)
		if err != nil || info.Size != v1.Size {
			t.Errorf("stored archive = %+v, %v; want %d bytes", info, err, v1.Size)
		}
		v2, err := s.Create(ctx, registry.NewSourceVersion{AgentID: a.ID, Digest: digest, Archive: archive})
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
		stored, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		if err := rc.Close(); err != nil {
			t.Fatal(err)
		}
		if sv.ID != v1.ID || !bytes.Equal(stored, archive) {
			t.Errorf("Open = %+v, archive %q; want the bytes given to Create", sv, stored)
		}

		// A failed record leaves no archive behind.
		if _, err := s.Create(ctx, registry.NewSourceVersion{AgentID: "anosuchagent", Digest: digest, Archive: archive}); !errors.Is(err, registry.ErrAgentNotFound) {
			t.Errorf("Create for a missing agent = %v, want ErrAgentNotFound", err)
		}
		if left, err := objects.List(ctx, "sources/anosuchagent/"); err != nil || len(left) != 0 {
			t.Errorf("archives left for a missing agent: %v, %v", left, err)
		}
		var ie *registry.InvalidError
		if _, err := s.Create(ctx, registry.NewSourceVersion{AgentID: a.ID, Digest: "sha256:xyz", Archive: archive}); !errors.As(err, &ie) || ie.Field != "digest" {
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
