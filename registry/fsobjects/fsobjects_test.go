package fsobjects_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"svc/registry"
	"svc/registry/fsobjects"
	"svc/registry/objectstest"
)

func newStore(tb testing.TB) registry.Objects {
	tb.Helper()
	s, err := fsobjects.New(filepath.Join(tb.TempDir(), "objects"))
	if err != nil {
		tb.Fatalf("New = %v", err)
	}
	return registry.Checked(s)
}

func TestConformance(t *testing.T) {
	objectstest.Run(t, newStore)
}

func BenchmarkStore(b *testing.B) {
	objectstest.Bench(b, newStore)
}

func TestNew(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		root    string
		wantErr string
	}{
		{"creates a missing root", filepath.Join(dir, "a", "b"), ""},
		{"existing root", dir, ""},
		{"empty root", "", "root directory is empty"},
		{"root is a file", file, "not a directory"},
		{"root below a file", filepath.Join(file, "below"), "create root directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fsobjects.New(tt.root)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("New(%q) = %v, want error containing %q", tt.root, err, tt.wantErr)
			}
		})
	}
}

// TestLayout checks that objects are plain files at their key's path, so an
// operator can inspect and back up the store with ordinary tools.
func TestLayout(t *testing.T) {
	root := t.TempDir()
	s := mustNew(t, root)
	if err := s.Put(t.Context(), "bundles/agent/abc.tar.zst", strings.NewReader("bundle"), 6); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "bundles", "agent", "abc.tar.zst"))
	if err != nil || string(got) != "bundle" {
		t.Errorf("file = %q, %v; want bundle", got, err)
	}
	if names := walk(t, root); len(names) != 1 {
		t.Errorf("files under root = %q, want only the object (no temporary files)", names)
	}
}

// TestTemporaryFilesHidden checks that temporary files, such as those a
// crash leaves behind, never show up as objects.
func TestTemporaryFilesHidden(t *testing.T) {
	root := t.TempDir()
	s := mustNew(t, root)
	ctx := t.Context()
	if err := s.Put(ctx, "dir/obj", strings.NewReader("obj"), 3); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{`.tmp\123`, `.tmp\456`} {
		if err := os.WriteFile(filepath.Join(root, "dir", name), []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, `.tmp\789`), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"", "dir/", "dir/.tmp", ".tmp"} {
		infos, err := s.List(ctx, prefix)
		if err != nil {
			t.Fatalf("List(%q) = %v", prefix, err)
		}
		for _, info := range infos {
			if info.Key != "dir/obj" {
				t.Errorf("List(%q) shows %q, want only dir/obj", prefix, info.Key)
			}
		}
	}
	if _, _, err := s.Get(ctx, `dir/.tmp\123`); !errors.Is(err, registry.ErrInvalidKey) {
		t.Errorf("Get(temporary file) = %v, want ErrInvalidKey", err)
	}
}

// TestFailedPutLeavesNoFile checks that a failed Put removes its temporary
// file.
func TestFailedPutLeavesNoFile(t *testing.T) {
	root := t.TempDir()
	s := mustNew(t, root)
	if err := s.Put(t.Context(), "a/b", strings.NewReader("short"), 100); err == nil {
		t.Fatal("Put with a short reader = nil, want an error")
	}
	if names := walk(t, root); len(names) != 0 {
		t.Errorf("files after the failed Put = %q, want none", names)
	}
}

// TestKeyUnderObject documents the directory-tree limit: a key cannot live
// below another object.
func TestKeyUnderObject(t *testing.T) {
	s := mustNew(t, t.TempDir())
	ctx := t.Context()
	if err := s.Put(ctx, "a", bytes.NewReader([]byte("a")), 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "a/b", bytes.NewReader([]byte("b")), 1); err == nil {
		t.Error("Put(a/b) with object a = nil, want an error")
	}
	if err := s.Put(ctx, "x/y", bytes.NewReader([]byte("y")), 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "x", bytes.NewReader([]byte("x")), 1); err == nil {
		t.Error("Put(x) with object x/y = nil, want an error")
	}
	if got, err := s.List(ctx, ""); err != nil || len(got) != 2 {
		t.Errorf("List = %+v, %v; want a and x/y", got, err)
	}
}

func mustNew(t *testing.T, root string) registry.Objects {
	t.Helper()
	s, err := fsobjects.New(root)
	if err != nil {
		t.Fatal(err)
	}
	return registry.Checked(s)
}

// walk returns the regular files under root, relative to it.
func walk(t *testing.T, root string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(root, p) // p is under root
			names = append(names, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}
