package client

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"svc/agent"

	"github.com/google/go-cmp/cmp"
)

// writeTree creates files (path → content; content "-> target" makes a symbolic link) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "-> "); ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type entry struct {
	Name, Link, Content string
	Mode                int64
	Type                byte
}

// entries reads a tar.gz archive in order.
func entries(t *testing.T, archive []byte) []entry {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var out []entry
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
		if hdr.ModTime.Unix() != 0 || hdr.Uid != 0 || hdr.Gid != 0 || hdr.Uname != "" {
			t.Errorf("%s: header %+v carries machine details", hdr.Name, hdr)
		}
		out = append(out, entry{Name: hdr.Name, Link: hdr.Linkname, Content: string(data), Mode: hdr.Mode, Type: hdr.Typeflag})
	}
}

func TestPackDir(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"svc.json":             `{"name":"x","version":"1"}`,
		"agents/a/agent.json":  "{}",
		"AGENT.md":             "# hi",
		".git/HEAD":            "ref: refs/heads/main",
		"sub/.git":             "gitdir: ../.git/modules/sub",
		"sub/file.txt":         "sub",
		".env.example":         "A=1",
		"knowledge/link.md":    "-> ../AGENT.md",
		"tools/t/handler.ts":   "export default 1",
		"deep/a/b/c/d/e/f.txt": "deep",
	})
	if err := os.Chmod(filepath.Join(dir, "AGENT.md"), 0o755); err != nil {
		t.Fatal(err)
	}
	var first bytes.Buffer
	if err := PackDir(dir, &first); err != nil {
		t.Fatal(err)
	}
	want := []entry{
		{Name: ".env.example", Content: "A=1", Mode: 0o644, Type: tar.TypeReg},
		{Name: "AGENT.md", Content: "# hi", Mode: 0o644, Type: tar.TypeReg},
		{Name: "agents/a/agent.json", Content: "{}", Mode: 0o644, Type: tar.TypeReg},
		{Name: "deep/a/b/c/d/e/f.txt", Content: "deep", Mode: 0o644, Type: tar.TypeReg},
		{Name: "knowledge/link.md", Link: "../AGENT.md", Mode: 0o777, Type: tar.TypeSymlink},
		{Name: "sub/file.txt", Content: "sub", Mode: 0o644, Type: tar.TypeReg},
		{Name: "svc.json", Content: `{"name":"x","version":"1"}`, Mode: 0o644, Type: tar.TypeReg},
		{Name: "tools/t/handler.ts", Content: "export default 1", Mode: 0o644, Type: tar.TypeReg},
	}
	if diff := cmp.Diff(want, entries(t, first.Bytes())); diff != "" {
		t.Errorf("archive (-want +got):\n%s", diff)
	}

	// The same tree elsewhere, written in another order with other times, gives the same bytes.
	other := t.TempDir()
	writeTree(t, other, map[string]string{"tools/t/handler.ts": "export default 1", "svc.json": `{"name":"x","version":"1"}`})
	writeTree(t, other, map[string]string{
		"deep/a/b/c/d/e/f.txt": "deep", "AGENT.md": "# hi", ".env.example": "A=1", "agents/a/agent.json": "{}",
		"sub/file.txt": "sub", "knowledge/link.md": "-> ../AGENT.md",
	})
	var second bytes.Buffer
	if err := PackDir(other, &second); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Error("the same tree packed twice gave different bytes")
	}
}

func TestPackDirRefusals(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	writeTree(t, dir, map[string]string{"f": "x"})
	special := t.TempDir()
	l, err := net.Listen("unix", filepath.Join(special, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close() //nolint:errcheck // test cleanup
	tests := []struct {
		name, dir, want string
	}{
		{"missing folder", filepath.Join(dir, "nope"), "no such file"},
		{"a file, not a folder", file, "not a folder"},
		{"a socket in the tree", special, "sock is not a regular file, folder or link"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := PackDir(tt.dir, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("PackDir(%s) = %v, want an error containing %q", tt.dir, err, tt.want)
			}
		})
	}
}

func TestPackDirLimits(t *testing.T) {
	limits := packLimits{file: 10, total: 25, files: 3}
	tests := []struct {
		name  string
		files map[string]string
		want  string // "" when accepted
	}{
		{"file at the size limit", map[string]string{"a": strings.Repeat("x", 10)}, ""},
		{"file one byte over", map[string]string{"a": strings.Repeat("x", 11)}, "a is 11 bytes, more than the limit of 10 bytes"},
		{"total at the limit", map[string]string{"a": strings.Repeat("x", 10), "b": strings.Repeat("x", 10), "c": "xxxxx"}, ""},
		{"total one byte over", map[string]string{"a": strings.Repeat("x", 10), "b": strings.Repeat("x", 10), "c": "xxxxxx"}, "files total more than the limit of 25 bytes (reached at c)"},
		{"file count at the limit", map[string]string{"a": "", "b": "", "c": "-> a"}, ""},
		{"one file too many", map[string]string{"a": "", "b": "", "c": "", "d": ""}, "more than 3 files (the limit), at d"},
		{".git does not count", map[string]string{"a": "", "b": "", "c": "", ".git/x": strings.Repeat("x", 100)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tt.files)
			err := packDir(dir, io.Discard, limits)
			if tt.want == "" {
				if err != nil {
					t.Errorf("packDir = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrSourceTooLarge) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("packDir = %v, want ErrSourceTooLarge containing %q", err, tt.want)
			}
		})
	}
}

// TestPackDirFileSizeLimit checks the real per-file limit at its edge.
func TestPackDirFileSizeLimit(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"big.md": strings.Repeat("x", MaxSourceFileSize)})
	if err := PackDir(dir, io.Discard); err != nil {
		t.Fatalf("file of exactly %d bytes: %v", MaxSourceFileSize, err)
	}
	writeTree(t, dir, map[string]string{"bigger.md": strings.Repeat("x", MaxSourceFileSize+1)})
	if err := PackDir(dir, io.Discard); !errors.Is(err, ErrSourceTooLarge) || !strings.Contains(err.Error(), "bigger.md") {
		t.Fatalf("file of %d bytes: %v, want ErrSourceTooLarge naming bigger.md", MaxSourceFileSize+1, err)
	}
}

// TestPackLimitsAreTheAgentLimits: the packer refuses exactly what the platform would.
func TestPackLimitsAreTheAgentLimits(t *testing.T) {
	if MaxSourceFileSize != agent.MaxFileSize || MaxSourceTotalSize != agent.MaxTreeSize || MaxSourceFiles != agent.MaxFiles {
		t.Errorf("client limits %d/%d/%d, agent limits %d/%d/%d", MaxSourceFileSize, MaxSourceTotalSize, MaxSourceFiles, agent.MaxFileSize, agent.MaxTreeSize, agent.MaxFiles)
	}
}
