package builder

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"

	"svc/registry"
)

// buildFixture builds a fixture from its files into a fresh store.
func buildFixture(t *testing.T, fixture string) (registry.Objects, Result) {
	t.Helper()
	src, err := FromFiles(fixtureFiles(t, fixture), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	obj := newObjects(t)
	res, err := Build(context.Background(), BuildInput{
		Source: src, Commit: strings.Repeat("c", 40), Branch: "main", SourceVersionID: "sv_7", AgentSlug: fixture,
	}, obj, nil)
	if err != nil {
		t.Fatal(err)
	}
	return obj, res
}

func TestBundleRoundTrip(t *testing.T) {
	obj, res := buildFixture(t, "support-desk")
	b, err := OpenBundle(context.Background(), obj, res.BundleKey)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(res.Manifest, b.Manifest); diff != "" {
		t.Errorf("manifest (-built +opened):\n%s", diff)
	}
	if b.Digest != res.BundleDigest {
		t.Errorf("Digest = %s, want %s", b.Digest, res.BundleDigest)
	}
	if diff := cmp.Diff(fixtureFiles(t, "support-desk"), treeFiles(t, b.Source)); diff != "" {
		t.Errorf("source (-want +got):\n%s", diff)
	}
	ag, err := b.Agent()
	if err != nil {
		t.Fatal(err)
	}
	if len(ag.Tools) != 2 {
		t.Fatalf("agent has %d tools, want 2", len(ag.Tools))
	}
	for name, tool := range ag.Tools {
		if tool.JS == "" || tool.JS != b.JS[name] {
			t.Errorf("tool %s: JS not set from the bundle", name)
		}
		if !strings.Contains(tool.JS, "sourceMappingURL") {
			t.Errorf("tool %s: JS has no inline source map", name)
		}
	}
	if !ag.Tools["refund_request"].Durable() {
		t.Error("refund_request is not durable")
	}
}

func TestBundleLayout(t *testing.T) {
	obj, res := buildFixture(t, "support-desk")
	data := readObject(t, obj, res.BundleKey)
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	raw, err := dec.DecodeAll(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(raw))
	var names []string
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
		if hdr.Typeflag != tar.TypeReg || hdr.Mode != 0o644 || hdr.Uid != 0 || hdr.Gid != 0 ||
			!hdr.ModTime.Equal(time.Unix(0, 0)) || hdr.Uname != "" || hdr.Gname != "" {
			t.Errorf("entry %s: type %c mode %o uid %d gid %d mtime %v owner %q/%q", hdr.Name, hdr.Typeflag, hdr.Mode, hdr.Uid, hdr.Gid, hdr.ModTime, hdr.Uname, hdr.Gname)
		}
	}
	want := []string{"build/tools/refund_request.js", "build/tools/triage.js", "manifest.json"}
	for _, p := range sortedKeys(fixtureFiles(t, "support-desk")) {
		want = append(want, "src/"+p)
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}

func TestOpenBundleErrors(t *testing.T) {
	ctx := context.Background()
	obj, res := buildFixture(t, "hello")
	data := readObject(t, obj, res.BundleKey)

	if _, err := OpenBundle(ctx, obj, "bundles/hello/"+strings.Repeat("0", 64)+".tar.zst"); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("missing bundle: error = %v, want registry.ErrNotFound", err)
	}

	// The right bytes under a key naming another digest.
	wrongKey := "bundles/hello/" + strings.Repeat("1", 64) + ".tar.zst"
	if err := obj.Put(ctx, wrongKey, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenBundle(ctx, obj, wrongKey); !errors.Is(err, ErrBadBundle) {
		t.Errorf("digest mismatch: error = %v, want ErrBadBundle", err)
	}
	// A key without a digest is not verified against one.
	if err := obj.Put(ctx, "other/hello.tar.zst", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenBundle(ctx, obj, "other/hello.tar.zst"); err != nil {
		t.Errorf("bundle under a plain key: %v", err)
	}
}

func TestReadBundleRefuses(t *testing.T) {
	_, res := buildFixture(t, "support-desk")
	src, err := FromFiles(fixtureFiles(t, "support-desk"), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	tree := src.(*memFS)
	js := map[string]string{"refund_request": "x", "triage": "y"}
	tests := []struct {
		name string
		data func(t *testing.T) []byte
		want string
	}{
		{"not zstd", func(*testing.T) []byte { return []byte("not a bundle") }, "zstd"},
		{"wrong format", func(t *testing.T) []byte {
			m := res.Manifest
			m.Format = "svc-bundle/9"
			return mustPack(t, tree, js, m)
		}, "format"},
		{"digest mismatch", func(t *testing.T) []byte {
			m := res.Manifest
			m.Digest = "sha256:" + strings.Repeat("0", 64)
			return mustPack(t, tree, js, m)
		}, "source digest"},
		{"missing tool JS", func(t *testing.T) []byte {
			return mustPack(t, tree, map[string]string{"triage": "y"}, res.Manifest)
		}, "build/tools"},
		{"extra entry", func(t *testing.T) []byte {
			return rawBundle(t, map[string]string{"manifest.json": "{}", "etc/passwd": "x"})
		}, "unexpected entry"},
		{"escaping source path", func(t *testing.T) []byte {
			return rawBundle(t, map[string]string{"manifest.json": "{}", "src/../x": "x"})
		}, "escapes"},
		{"no manifest", func(t *testing.T) []byte {
			return rawBundle(t, map[string]string{"src/svc.json": "{}"})
		}, "manifest.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadBundle(tt.data(t))
			if !errors.Is(err, ErrBadBundle) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want ErrBadBundle mentioning %q", err, tt.want)
			}
		})
	}
}

func mustPack(t *testing.T, tree *memFS, js map[string]string, m Manifest) []byte {
	t.Helper()
	data, err := pack(tree, js, m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// rawBundle packs arbitrary entries the way pack does, without its checks.
func rawBundle(t *testing.T, entries map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range sortedKeys(entries) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(entries[name])), Mode: 0o644}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(entries[name])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close() //nolint:errcheck // EncodeAll only
	return enc.EncodeAll(buf.Bytes(), nil)
}

func TestBundleAgentToolMismatch(t *testing.T) {
	src, err := FromFiles(fixtureFiles(t, "support-desk"), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for name, js := range map[string]map[string]string{
		"missing JS": {"triage": "y"},
		"extra JS":   {"triage": "y", "refund_request": "x", "ghost": "z"},
	} {
		b := &Bundle{Digest: "sha256:test", Source: src, JS: js}
		if _, err := b.Agent(); !errors.Is(err, ErrBadBundle) {
			t.Errorf("%s: error = %v, want ErrBadBundle", name, err)
		}
	}
	info, err := fs.Stat(src, "svc.json")
	if err != nil || info.Mode() != 0o444 {
		t.Fatalf("Stat(svc.json) = %v, %v; want a read-only file", info, err)
	}
}

// TestBundleOpensEveryAcceptedTree is the property that a runner can open what a build accepted:
// random trees within the limits (deep paths, many folders, empty and binary files) build, open
// through the object store as a runner opens them, and give back the same files.
func TestBundleOpensEveryAcceptedTree(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	base := fixtureFiles(t, "hello")
	trees := []map[string]string{
		withFiles(base, map[string]string{deepPath(DefaultMaxDepth): "at the depth limit"}),
		withFiles(base, map[string]string{"docs/a/b/c/d/e/f/g/h/i/j/k/notes.md": "twelve folders deep"}),
	}
	for range 40 {
		extra := map[string]string{}
		for range 1 + rng.IntN(60) {
			depth := 1 + rng.IntN(DefaultMaxDepth-1)
			elems := []string{"docs"}
			for range depth - 1 {
				elems = append(elems, string(rune('a'+rng.IntN(3))))
			}
			p := strings.Join(elems, "/") + fmt.Sprintf("/f%d", rng.IntN(1000))
			body := make([]byte, rng.IntN(300))
			for i := range body {
				body[i] = byte(rng.IntN(256))
			}
			extra[p] = string(body)
		}
		trees = append(trees, withFiles(base, extra))
	}
	for i, files := range trees {
		src, err := FromFiles(files, Limits{})
		if err != nil {
			// A random path can be both a file and a folder: that tree is refused, not opened.
			var se *SourceError
			if errors.As(err, &se) && errors.Is(err, ErrUnsupportedFile) {
				continue
			}
			t.Fatalf("tree %d: %v", i, err)
		}
		obj := newObjects(t)
		res, err := Build(context.Background(), BuildInput{Source: src, AgentSlug: "prop"}, obj, nil)
		if err != nil {
			t.Fatalf("tree %d: build: %v", i, err)
		}
		b, err := OpenBundle(context.Background(), obj, res.BundleKey)
		if err != nil {
			t.Fatalf("tree %d: open: %v", i, err)
		}
		if diff := cmp.Diff(files, treeFiles(t, b.Source)); diff != "" {
			t.Fatalf("tree %d: source (-built +opened):\n%s", i, diff)
		}
		if _, err := b.Agent(); err != nil {
			t.Fatalf("tree %d: agent: %v", i, err)
		}
	}
}

// withFiles returns a copy of base with extra added.
func withFiles(base, extra map[string]string) map[string]string {
	out := maps.Clone(base)
	maps.Copy(out, extra)
	return out
}
