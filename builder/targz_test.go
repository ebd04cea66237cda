package builder

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
)

func TestReadTarGzRefuses(t *testing.T) {
	file := tarEntry{name: "svc.json", body: "{}"}
	tests := []struct {
		name    string
		entries []tarEntry
		kind    error
		path    string // the path the error must name
	}{
		{"parent element", []tarEntry{file, {name: "../x", body: "x"}}, ErrUnsafePath, "../x"},
		{"inner parent", []tarEntry{{name: "a/../../x", body: "x"}}, ErrUnsafePath, "a/../../x"},
		{"absolute path", []tarEntry{{name: "/etc/passwd", body: "x"}}, ErrUnsafePath, "/etc/passwd"},
		{"absolute folder", []tarEntry{{name: "/tmp/", typeflag: tar.TypeDir}}, ErrUnsafePath, "/tmp/"},
		{"symlink to absolute", []tarEntry{{name: "l", typeflag: tar.TypeSymlink, link: "/etc/passwd"}}, ErrUnsafePath, "l"},
		{"symlink up", []tarEntry{{name: "a/l", typeflag: tar.TypeSymlink, link: "../../etc/x"}}, ErrUnsafePath, "a/l"},
		{"symlink escape through a folder link", []tarEntry{
			{name: "a/up", typeflag: tar.TypeSymlink, link: ".."},
			{name: "b/l", typeflag: tar.TypeSymlink, link: "../a/up/../x"},
		}, ErrUnsupportedFile, "a/up"}, // a/up itself is a link to a folder
		{"hard link escape", []tarEntry{{name: "h", typeflag: tar.TypeLink, link: "../x"}}, ErrUnsafePath, "h"},
		{"symlink to folder", []tarEntry{{name: "d/f", body: "x"}, {name: "l", typeflag: tar.TypeSymlink, link: "d"}}, ErrUnsupportedFile, "l"},
		{"broken symlink", []tarEntry{{name: "l", typeflag: tar.TypeSymlink, link: "missing"}}, ErrUnsupportedFile, "l"},
		{"symlink loop", []tarEntry{{name: "a", typeflag: tar.TypeSymlink, link: "b"}, {name: "b", typeflag: tar.TypeSymlink, link: "a"}}, ErrUnsupportedFile, "a"},
		{"character device", []tarEntry{{name: "dev", typeflag: tar.TypeChar}}, ErrUnsupportedFile, "dev"},
		{"fifo", []tarEntry{{name: "pipe", typeflag: tar.TypeFifo}}, ErrUnsupportedFile, "pipe"},
		{"duplicate", []tarEntry{file, file}, ErrUnsupportedFile, "svc.json"},
		{"file under a link", []tarEntry{{name: "d/f", body: "x"}, {name: "l", typeflag: tar.TypeSymlink, link: "d/f"}, {name: "l/g", body: "y"}}, ErrUnsupportedFile, "l/g"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadTarGz(bytes.NewReader(makeTarGz(t, tt.entries)), Limits{})
			if !errors.Is(err, tt.kind) {
				t.Fatalf("error = %v, want %v", err, tt.kind)
			}
			var se *SourceError
			if !errors.As(err, &se) || se.Path != tt.path {
				t.Fatalf("error = %v, want a *SourceError for %q", err, tt.path)
			}
			if !strings.HasPrefix(err.Error(), tt.path+": ") {
				t.Errorf("message %q does not start with the path", err)
			}
		})
	}
}

func TestReadTarGzLinksInside(t *testing.T) {
	data := makeTarGz(t, []tarEntry{
		{name: "./", typeflag: tar.TypeDir},
		{name: "./docs/real.md", body: "real"},
		{name: "./docs/alias.md", typeflag: tar.TypeSymlink, link: "real.md"},
		{name: "./top.md", typeflag: tar.TypeSymlink, link: "docs/../docs/alias.md"},
		{name: "./hard.md", typeflag: tar.TypeLink, link: "./docs/real.md"},
		{name: "./docs/hard2.md", typeflag: tar.TypeLink, link: "top.md"},
		{name: "./empty/", typeflag: tar.TypeDir},
	})
	fsys, err := ReadTarGz(bytes.NewReader(data), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"docs/real.md", "docs/alias.md", "top.md", "hard.md", "docs/hard2.md"} {
		got, err := fs.ReadFile(fsys, p)
		if err != nil || string(got) != "real" {
			t.Errorf("ReadFile(%s) = %q, %v; want the content of docs/real.md", p, got, err)
		}
		info, err := fs.Stat(fsys, p)
		if err != nil || !info.Mode().IsRegular() {
			t.Errorf("Stat(%s) = %v, %v; want a regular file", p, info, err)
		}
	}
	if info, err := fs.Stat(fsys, "empty"); err != nil || !info.IsDir() {
		t.Errorf("Stat(empty) = %v, %v; want a folder", info, err)
	}
}

func TestReadTarGzNotGzip(t *testing.T) {
	if _, err := ReadTarGz(strings.NewReader("plain text"), Limits{}); err == nil || !strings.Contains(err.Error(), "tar.gz") {
		t.Fatalf("error = %v, want a tar.gz error", err)
	}
}

// TestReadTarGzDefaultLimits checks each default limit at its edge: at the limit is accepted, one
// byte or one file more is refused with the file or the totals named.
func TestReadTarGzDefaultLimits(t *testing.T) {
	const mib = 1 << 20
	manyFiles := func(n int) []tarEntry {
		entries := make([]tarEntry, n)
		for i := range entries {
			entries[i] = tarEntry{name: fmt.Sprintf("f/%05d", i), body: "x"}
		}
		return entries
	}
	bigFiles := func(extra int64) []tarEntry {
		entries := make([]tarEntry, 10)
		for i := range entries {
			entries[i] = tarEntry{name: fmt.Sprintf("big/%d.bin", i), size: 5 * mib}
		}
		if extra > 0 {
			entries = append(entries, tarEntry{name: "one-more", size: extra})
		}
		return entries
	}
	tests := []struct {
		name    string
		entries []tarEntry
		kind    error
		path    string
		message string
	}{
		{"file at 5 MiB", []tarEntry{{name: "svc/knowledge/big.md", size: 5 * mib}}, nil, "", ""},
		{"file at 5 MiB + 1", []tarEntry{{name: "svc/knowledge/big.md", size: 5*mib + 1}}, ErrTooLarge, "svc/knowledge/big.md", "5242881 bytes"},
		{"total at 50 MiB", bigFiles(0), nil, "", ""},
		{"total at 50 MiB + 1", bigFiles(1), ErrTooLarge, ".", "52428800"},
		{"10000 files", manyFiles(10_000), nil, "", ""},
		{"10001 files", manyFiles(10_001), ErrTooManyFiles, ".", "10000 files"},
		{"path 32 deep", []tarEntry{{name: deepPath(32), body: "x"}}, nil, "", ""},
		{"path 33 deep", []tarEntry{{name: deepPath(33), body: "x"}}, ErrTooDeep, deepPath(33), "limit of 32"},
		{"folder 33 deep", []tarEntry{{name: deepPath(33) + "/", typeflag: tar.TypeDir}}, ErrTooDeep, deepPath(33), "limit of 32"},
		{"10000 folders", manyFolders(10_000, false), nil, "", ""},
		{"10001 folders", manyFolders(10_000, true), ErrTooManyFiles, ".", "10000 folders"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys, err := ReadTarGz(bytes.NewReader(makeTarGz(t, tt.entries)), Limits{})
			if !errors.Is(err, tt.kind) {
				t.Fatalf("error = %v, want %v", err, tt.kind)
			}
			if tt.kind == nil {
				if n := len(fsys.(*memFS).files); n != countFiles(tt.entries) {
					t.Fatalf("tree has %d files, want %d", n, len(tt.entries))
				}
				return
			}
			var se *SourceError
			if !errors.As(err, &se) || se.Path != tt.path || !strings.Contains(se.Message, tt.message) {
				t.Fatalf("error = %v, want a *SourceError for %q mentioning %q", err, tt.path, tt.message)
			}
		})
	}
}

// deepPath is a file path of n elements: d/d/.../f.md.
func deepPath(n int) string { return strings.Repeat("d/", n-1) + "f.md" }

// manyFolders is n folders (n even: n/2 files, each two folders deep, the folders implied), plus
// one empty folder when extra is true.
func manyFolders(n int, extra bool) []tarEntry {
	entries := make([]tarEntry, 0, n/2+1)
	for i := range n / 2 {
		entries = append(entries, tarEntry{name: fmt.Sprintf("%05d/x/f", i), body: "x"})
	}
	if extra {
		entries = append(entries, tarEntry{name: "empty/", typeflag: tar.TypeDir})
	}
	return entries
}

// countFiles counts the regular files of entries.
func countFiles(entries []tarEntry) int {
	n := 0
	for _, e := range entries {
		if e.typeflag == 0 || e.typeflag == tar.TypeReg {
			n++
		}
	}
	return n
}
