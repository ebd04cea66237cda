package bundle

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"

	"svc/agent"
)

// packFixture packs a fixture as a build does: the tree, its agent's compiled tools and a manifest.
func packFixture(t *testing.T, fixture string) ([]byte, Manifest) {
	t.Helper()
	src, err := FromFiles(fixtureFiles(t, fixture), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	tree := src.(*Tree)
	ag, err := agent.Load(tree)
	if err != nil {
		t.Fatal(err)
	}
	js := map[string]string{}
	for name, tool := range ag.Tools {
		js[name] = tool.JS
	}
	m := NewManifest(ag, tree.Digest(), Origin{Commit: strings.Repeat("c", 40), Branch: "main", SourceVersionID: "sv_7"})
	data, err := Pack(tree, js, m)
	if err != nil {
		t.Fatal(err)
	}
	return data, m
}

func TestBundleRoundTrip(t *testing.T) {
	data, m := packFixture(t, "support-desk")
	key := Key("support-desk", DigestOf(data))
	if want := "bundles/support-desk/" + strings.TrimPrefix(DigestOf(data), "sha256:") + ".tar.zst"; key != want {
		t.Errorf("Key = %s, want %s", key, want)
	}
	b, err := Read(bytes.NewReader(data), key)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(m, b.Manifest); diff != "" {
		t.Errorf("manifest (-packed +read):\n%s", diff)
	}
	if b.Digest != DigestOf(data) {
		t.Errorf("Digest = %s, want %s", b.Digest, DigestOf(data))
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
	again, _ := packFixture(t, "support-desk")
	if !bytes.Equal(again, data) {
		t.Error("packing the same tree twice gave other bytes")
	}
}

func TestBundleLayout(t *testing.T) {
	data, _ := packFixture(t, "support-desk")
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

// TestReadChecksTheKey: bytes under a key of Key's form must hash to its digest; other keys are
// not checked against one.
func TestReadChecksTheKey(t *testing.T) {
	data, _ := packFixture(t, "hello")
	wrongKey := Key("hello", "sha256:"+strings.Repeat("1", 64))
	if _, err := Read(bytes.NewReader(data), wrongKey); !errors.Is(err, ErrBadBundle) || !strings.Contains(err.Error(), wrongKey) {
		t.Errorf("digest mismatch: error = %v, want ErrBadBundle naming the key", err)
	}
	if _, err := Read(bytes.NewReader(data), "other/hello.tar.zst"); err != nil {
		t.Errorf("bundle under a plain key: %v", err)
	}
	if _, err := Read(strings.NewReader("not a bundle"), "other/x.tar.zst"); !errors.Is(err, ErrBadBundle) {
		t.Errorf("not a bundle: error = %v, want ErrBadBundle", err)
	}
}

func TestUnpackRefuses(t *testing.T) {
	_, manifest := packFixture(t, "support-desk")
	src, err := FromFiles(fixtureFiles(t, "support-desk"), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	tree := src.(*Tree)
	js := map[string]string{"refund_request": "x", "triage": "y"}
	tests := []struct {
		name string
		data func(t *testing.T) []byte
		want string
	}{
		{"not zstd", func(*testing.T) []byte { return []byte("not a bundle") }, "zstd"},
		{"wrong format", func(t *testing.T) []byte {
			m := manifest
			m.Format = "svc-bundle/9"
			return mustPack(t, tree, js, m)
		}, "format"},
		{"digest mismatch", func(t *testing.T) []byte {
			m := manifest
			m.Digest = "sha256:" + strings.Repeat("0", 64)
			return mustPack(t, tree, js, m)
		}, "source digest"},
		{"missing tool JS", func(t *testing.T) []byte {
			return mustPack(t, tree, map[string]string{"triage": "y"}, manifest)
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
			_, err := Unpack(tt.data(t))
			if !errors.Is(err, ErrBadBundle) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want ErrBadBundle mentioning %q", err, tt.want)
			}
		})
	}
}

func mustPack(t *testing.T, tree *Tree, js map[string]string, m Manifest) []byte {
	t.Helper()
	data, err := Pack(tree, js, m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// rawBundle packs arbitrary entries the way Pack does, without its checks.
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
