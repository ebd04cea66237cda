package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"svc/agent/agenttest"
	"svc/bundle/bundletest"
)

func TestFromFiles(t *testing.T) {
	fsys, err := FromFiles(map[string]string{"svc.json": "{}", "a/b/c.txt": "hello", "a/d.txt": ""}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := fs.ReadFile(fsys, "a/b/c.txt")
	if err != nil || string(got) != "hello" {
		t.Fatalf("ReadFile(a/b/c.txt) = %q, %v, want hello", got, err)
	}
	info, err := fs.Stat(fsys, "a/b/c.txt")
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode() != 0o444 || !info.ModTime().IsZero() || info.Size() != 5 {
		t.Errorf("Stat = mode %v, mtime %v, size %d; want 0444, zero, 5", info.Mode(), info.ModTime(), info.Size())
	}
}

func TestFromFilesRefusesBadPaths(t *testing.T) {
	tests := []struct {
		name string
		path string
		kind error
	}{
		{"parent", "../x", ErrUnsafePath},
		{"inner parent", "a/../../x", ErrUnsafePath},
		{"absolute", "/etc/passwd", ErrUnsafePath},
		{"empty", "", ErrUnsafePath},
		{"empty element", "a//b", ErrUnsafePath},
		{"dot element", "a/./b", ErrUnsafePath},
		{"backslash", `a\b`, ErrUnsafePath},
		{"nul", "a\x00b", ErrUnsafePath},
		{"root", ".", ErrUnsafePath},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FromFiles(map[string]string{tt.path: "x"}, Limits{})
			if !errors.Is(err, tt.kind) {
				t.Fatalf("FromFiles(%q) error = %v, want %v", tt.path, err, tt.kind)
			}
			var se *SourceError
			if !errors.As(err, &se) || se.Path == "" {
				t.Fatalf("error %v is not a *SourceError naming the path", err)
			}
		})
	}
}

func TestFromFilesConflicts(t *testing.T) {
	_, err := FromFiles(map[string]string{"a": "file", "a/b": "under a file"}, Limits{})
	if !errors.Is(err, ErrUnsupportedFile) || !strings.Contains(err.Error(), "a") {
		t.Fatalf("error = %v, want ErrUnsupportedFile naming a", err)
	}
}

func TestFromFilesLimits(t *testing.T) {
	limits := Limits{MaxFileSize: 4, MaxTotalSize: 10, MaxFiles: 3}
	tests := []struct {
		name  string
		files map[string]string
		kind  error
		path  string
	}{
		{"at every limit", map[string]string{"a": "1234", "b": "1234", "c": "12"}, nil, ""},
		{"file one byte over", map[string]string{"a": "12345"}, ErrTooLarge, "a"},
		{"total one byte over", map[string]string{"a": "1234", "b": "1234", "c": "123"}, ErrTooLarge, "."},
		{"one file too many", map[string]string{"a": "", "b": "", "c": "", "d": ""}, ErrTooManyFiles, "."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FromFiles(tt.files, limits)
			if !errors.Is(err, tt.kind) {
				t.Fatalf("error = %v, want %v", err, tt.kind)
			}
			var se *SourceError
			if tt.kind != nil && (!errors.As(err, &se) || se.Path != tt.path) {
				t.Fatalf("error = %#v, want a *SourceError for %q", err, tt.path)
			}
		})
	}
}

func TestDigestFormat(t *testing.T) {
	fsys, err := FromFiles(map[string]string{"b.txt": "bb", "a/x": "x"}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Digest(fsys)
	if err != nil {
		t.Fatal(err)
	}
	hexSum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	canonical := "a/x\x001\x00" + hexSum("x") + "\n" + "b.txt\x002\x00" + hexSum("bb") + "\n"
	if want := "sha256:" + hexSum(canonical); got != want {
		t.Fatalf("Digest = %s, want %s", got, want)
	}
	empty, err := FromFiles(nil, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := Digest(empty); got != "sha256:"+hexSum("") {
		t.Fatalf("Digest(empty) = %s", got)
	}
}

func TestDigestSameFilesAnyOrigin(t *testing.T) {
	files := fixtureFiles(t, "support-desk")
	fromMap, err := FromFiles(files, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := Digest(fromMap)
	if err != nil {
		t.Fatal(err)
	}

	// Reverse order, odd modes and times, explicit folders: the digest does not change.
	entries := bundletest.Entries(files)
	reversed := []bundletest.Entry{{Name: "./", Type: '5'}}
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		e.Name = "./" + e.Name
		e.Mode = 0o755
		e.ModTime = e.ModTime.AddDate(0, 0, i)
		reversed = append(reversed, e)
	}
	fromTar, err := ReadTarGz(strings.NewReader(string(bundletest.TarGz(t, reversed))), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for name, fsys := range map[string]fs.FS{
		"tar":     fromTar,
		"dir":     os.DirFS(agenttest.Dir(t, "support-desk")),
		"map":     fstest.MapFS(mapFS(files)),
		"fromMap": fromMap,
	} {
		got, err := Digest(fsys)
		if err != nil || got != want {
			t.Errorf("Digest(%s) = %s, %v; want %s", name, got, err, want)
		}
	}

	files["svc.json"] += " "
	changed, err := FromFiles(files, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := Digest(changed); got == want {
		t.Error("Digest did not change with a file's content")
	}
}

func mapFS(files map[string]string) fstest.MapFS {
	m := fstest.MapFS{}
	for p, body := range files {
		m[p] = &fstest.MapFile{Data: []byte(body), Mode: 0o600}
	}
	return m
}

func TestDigestDirFSSymlinks(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "real.md"), []byte("content"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real.md", filepath.Join(dir, "alias.md")); err != nil {
		t.Fatal(err)
	}
	withLink, err := Digest(os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	copied, err := FromFiles(map[string]string{"real.md": "content", "alias.md": "content"}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := Digest(copied); withLink != want {
		t.Errorf("a link inside the tree digests as %s, want it as a copy (%s)", withLink, want)
	}

	if err := os.Symlink("../outside", filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	_, err = Digest(os.DirFS(dir))
	if !errors.Is(err, ErrUnsafePath) || !strings.Contains(err.Error(), "escape") {
		t.Fatalf("Digest with an escaping link: error = %v, want ErrUnsafePath naming escape", err)
	}
}
