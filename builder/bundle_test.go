package builder

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"svc/bundle"

	"github.com/google/go-cmp/cmp"
)

// TestBundleOpensEveryAcceptedTree is the property that a runner can open what a build accepted:
// random trees within the limits (deep paths, many folders, empty and binary files) build, open
// through the object store as a runner opens them, and give back the same files.
func TestBundleOpensEveryAcceptedTree(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	base := fixtureFiles(t, "hello")
	trees := []map[string]string{
		withFiles(base, map[string]string{strings.Repeat("d/", bundle.DefaultMaxDepth-1) + "f.md": "at the depth limit"}),
		withFiles(base, map[string]string{"docs/a/b/c/d/e/f/g/h/i/j/k/notes.md": "twelve folders deep"}),
	}
	for range 40 {
		extra := map[string]string{}
		for range 1 + rng.IntN(60) {
			depth := 1 + rng.IntN(bundle.DefaultMaxDepth-1)
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
		src, err := bundle.FromFiles(files, bundle.Limits{})
		if err != nil {
			// A random path can be both a file and a folder: that tree is refused, not opened.
			var se *bundle.SourceError
			if errors.As(err, &se) && errors.Is(err, bundle.ErrUnsupportedFile) {
				continue
			}
			t.Fatalf("tree %d: %v", i, err)
		}
		obj := newObjects(t)
		res, err := Build(context.Background(), BuildInput{Source: src, AgentSlug: "prop"}, obj, nil)
		if err != nil {
			t.Fatalf("tree %d: build: %v", i, err)
		}
		b, _, err := OpenStored(context.Background(), obj, res.BundleKey)
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
