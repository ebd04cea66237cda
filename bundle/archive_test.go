package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"svc/bundle/bundletest"
)

func TestReadTarGzRefuses(t *testing.T) {
	file := bundletest.Entry{Name: "svc.json", Body: "{}"}
	tests := []struct {
		name    string
		entries []bundletest.Entry
		kind    error
		path    string // the path the error must name
	}{
		{"parent element", []bundletest.Entry{file, {Name: "../x", Body: "x"}}, ErrUnsafePath, "../x"},
		{"inner parent", []bundletest.Entry{{Name: "a/../../x", Body: "x"}}, ErrUnsafePath, "a/../../x"},
		{"absolute path", []bundletest.Entry{{Name: "/etc/passwd", Body: "x"}}, ErrUnsafePath, "/etc/passwd"},
		{"absolute folder", []bundletest.Entry{{Name: "/tmp/", Type: tar.TypeDir}}, ErrUnsafePath, "/tmp/"},
		{"symlink to absolute", []bundletest.Entry{{Name: "l", Type: tar.TypeSymlink, Link: "/etc/passwd"}}, ErrUnsafePath, "l"},
		{"symlink up", []bundletest.Entry{{Name: "a/l", Type: tar.TypeSymlink, Link: "../../etc/x"}}, ErrUnsafePath, "a/l"},
		{"symlink escape through a folder link", []bundletest.Entry{
			{Name: "a/up", Type: tar.TypeSymlink, Link: ".."},
			{Name: "b/l", Type: tar.TypeSymlink, Link: "../a/up/../x"},
		}, ErrUnsupportedFile, "a/up"}, // a/up itself is a link to a folder
		{"hard link escape", []bundletest.Entry{{Name: "h", Type: tar.TypeLink, Link: "../x"}}, ErrUnsafePath, "h"},
		{"symlink to folder", []bundletest.Entry{{Name: "d/f", Body: "x"}, {Name: "l", Type: tar.TypeSymlink, Link: "d"}}, ErrUnsupportedFile, "l"},
		{"broken symlink", []bundletest.Entry{{Name: "l", Type: tar.TypeSymlink, Link: "missing"}}, ErrUnsupportedFile, "l"},
		{"symlink loop", []bundletest.Entry{{Name: "a", Type: tar.TypeSymlink, Link: "b"}, {Name: "b", Type: tar.TypeSymlink, Link: "a"}}, ErrUnsupportedFile, "a"},
		{"character device", []bundletest.Entry{{Name: "dev", Type: tar.TypeChar}}, ErrUnsupportedFile, "dev"},
		{"fifo", []bundletest.Entry{{Name: "pipe", Type: tar.TypeFifo}}, ErrUnsupportedFile, "pipe"},
		{"duplicate", []bundletest.Entry{file, file}, ErrUnsupportedFile, "svc.json"},
		{"file under a link", []bundletest.Entry{{Name: "d/f", Body: "x"}, {Name: "l", Type: tar.TypeSymlink, Link: "d/f"}, {Name: "l/g", Body: "y"}}, ErrUnsupportedFile, "l/g"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadTarGz(bytes.NewReader(bundletest.TarGz(t, tt.entries)), Limits{})
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
	data := bundletest.TarGz(t, []bundletest.Entry{
		{Name: "./", Type: tar.TypeDir},
		{Name: "./docs/real.md", Body: "real"},
		{Name: "./docs/alias.md", Type: tar.TypeSymlink, Link: "real.md"},
		{Name: "./top.md", Type: tar.TypeSymlink, Link: "docs/../docs/alias.md"},
		{Name: "./hard.md", Type: tar.TypeLink, Link: "./docs/real.md"},
		{Name: "./docs/hard2.md", Type: tar.TypeLink, Link: "top.md"},
		{Name: "./empty/", Type: tar.TypeDir},
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
	manyFiles := func(n int) []bundletest.Entry {
		entries := make([]bundletest.Entry, n)
		for i := range entries {
			entries[i] = bundletest.Entry{Name: fmt.Sprintf("f/%05d", i), Body: "x"}
		}
		return entries
	}
	bigFiles := func(extra int64) []bundletest.Entry {
		entries := make([]bundletest.Entry, 10)
		for i := range entries {
			entries[i] = bundletest.Entry{Name: fmt.Sprintf("big/%d.bin", i), Size: 5 * mib}
		}
		if extra > 0 {
			entries = append(entries, bundletest.Entry{Name: "one-more", Size: extra})
		}
		return entries
	}
	tests := []struct {
		name    string
		entries []bundletest.Entry
		kind    error
		path    string
		message string
	}{
		{"file at 5 MiB", []bundletest.Entry{{Name: "svc/knowledge/big.md", Size: 5 * mib}}, nil, "", ""},
		{"file at 5 MiB + 1", []bundletest.Entry{{Name: "svc/knowledge/big.md", Size: 5*mib + 1}}, ErrTooLarge, "svc/knowledge/big.md", "5242881 bytes"},
		{"total at 50 MiB", bigFiles(0), nil, "", ""},
		{"total at 50 MiB + 1", bigFiles(1), ErrTooLarge, ".", "52428800"},
		{"10000 files", manyFiles(10_000), nil, "", ""},
		{"10001 files", manyFiles(10_001), ErrTooManyFiles, ".", "10000 files"},
		{"path 32 deep", []bundletest.Entry{{Name: deepPath(32), Body: "x"}}, nil, "", ""},
		{"path 33 deep", []bundletest.Entry{{Name: deepPath(33), Body: "x"}}, ErrTooDeep, deepPath(33), "limit of 32"},
		{"folder 33 deep", []bundletest.Entry{{Name: deepPath(33) + "/", Type: tar.TypeDir}}, ErrTooDeep, deepPath(33), "limit of 32"},
		{"10000 folders", manyFolders(10_000, false), nil, "", ""},
		{"10001 folders", manyFolders(10_000, true), ErrTooManyFiles, ".", "10000 folders"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys, err := ReadTarGz(bytes.NewReader(bundletest.TarGz(t, tt.entries)), Limits{})
			if !errors.Is(err, tt.kind) {
				t.Fatalf("error = %v, want %v", err, tt.kind)
			}
			if tt.kind == nil {
				if n := len(fsys.(*Tree).files); n != countFiles(tt.entries) {
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
func manyFolders(n int, extra bool) []bundletest.Entry {
	entries := make([]bundletest.Entry, 0, n/2+1)
	for i := range n / 2 {
		entries = append(entries, bundletest.Entry{Name: fmt.Sprintf("%05d/x/f", i), Body: "x"})
	}
	if extra {
		entries = append(entries, bundletest.Entry{Name: "empty/", Type: tar.TypeDir})
	}
	return entries
}

// countFiles counts the regular files of entries.
func countFiles(entries []bundletest.Entry) int {
	n := 0
	for _, e := range entries {
		if e.Type == 0 || e.Type == tar.TypeReg {
			n++
		}
	}
	return n
}

func TestWriteTarGzIsDeterministic(t *testing.T) {
	tree := fstest.MapFS{
		"svc.json":                {Data: []byte(`{"name":"x","version":"1"}`), Mode: 0o600},
		"agents/default/AGENT.md": {Data: []byte("# hi\n")},
		"a/b/c.txt":               {Data: []byte("c")},
	}
	var one, two bytes.Buffer
	if err := WriteTarGz(&one, tree); err != nil {
		t.Fatal(err)
	}
	if err := WriteTarGz(&two, tree); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(one.Bytes(), two.Bytes()) {
		t.Error("two packs of the same tree differ")
	}
	got := strings.Join(untar(t, bytes.NewReader(one.Bytes())), ";")
	want := `a/b/c.txt=c;agents/default/AGENT.md=# hi` + "\n" + `;svc.json={"name":"x","version":"1"}`
	if got != want {
		t.Errorf("WriteTarGz entries = %q, want %q", got, want)
	}
	// ReadTarGz reads it back into the same tree.
	back, err := ReadTarGz(&one, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := Digest(back); err != nil || d != mustDigest(t, tree) {
		t.Errorf("read back: digest %s, %v; want %s", d, err, mustDigest(t, tree))
	}
}

func mustDigest(t *testing.T, fsys fs.FS) string {
	t.Helper()
	d, err := Digest(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return d
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

// TestReadTarGzNonUTF8Name checks that an entry whose name is not valid UTF-8 is refused as such,
// naming the entry with its bytes escaped, and not as an "empty or "." element" path.
func TestReadTarGzNonUTF8Name(t *testing.T) {
	for _, name := range []string{"bad\xffname.txt", "dir\xc3/f.md"} {
		_, err := ReadTarGz(bytes.NewReader(bundletest.TarGz(t, []bundletest.Entry{{Name: name, Body: "x"}})), Limits{})
		if !errors.Is(err, ErrUnsafePath) {
			t.Fatalf("%q: error = %v, want ErrUnsafePath", name, err)
		}
		want := fmt.Sprintf("%q: file name is not valid UTF-8", name)
		if err.Error() != want {
			t.Errorf("%q: error = %q, want %q", name, err, want)
		}
	}
	// Other invalid paths keep their message.
	_, err := ReadTarGz(bytes.NewReader(bundletest.TarGz(t, []bundletest.Entry{{Name: "a//b", Body: "x"}})), Limits{})
	if err == nil || err.Error() != `a//b: invalid path (empty or "." element)` {
		t.Errorf("a//b: error = %v", err)
	}
}
