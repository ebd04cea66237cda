package builder

import (
	"context"
	"testing"
)

// BenchmarkBuildSupportDesk builds support-desk from an in-memory tree into a filesystem store:
// validate (agent.Load with its esbuild compile), compile, pack; the upload is skipped after the
// first iteration since the bundle is the same.
func BenchmarkBuildSupportDesk(b *testing.B) {
	src, err := FromFiles(fixtureFiles(b, "support-desk"), Limits{})
	if err != nil {
		b.Fatal(err)
	}
	obj := newObjects(b)
	in := BuildInput{Source: src, Commit: "0123456789abcdef0123456789abcdef01234567", Branch: "main", AgentSlug: "support-desk"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Build(context.Background(), in, obj, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPackSupportDesk measures the pack step alone (tar + zstd of the tree and its JS).
func BenchmarkPackSupportDesk(b *testing.B) {
	src, err := FromFiles(fixtureFiles(b, "support-desk"), Limits{})
	if err != nil {
		b.Fatal(err)
	}
	tree := src.(*memFS)
	js := map[string]string{"refund_request": "module.exports = {}", "triage": "module.exports = {}"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pack(tree, js, Manifest{Format: BundleFormat, Digest: tree.Digest()}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFetchFileURL fetches support-desk's head over file:// (git-upload-pack) into memory.
func BenchmarkFetchFileURL(b *testing.B) {
	r, _ := fixtureRepo(b, "support-desk")
	src := GitSource{URL: r.url(), Branch: "main"}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := FetchGit(context.Background(), src, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpenBundle reads and verifies a support-desk bundle from a filesystem store.
func BenchmarkOpenBundle(b *testing.B) {
	src, err := FromFiles(fixtureFiles(b, "support-desk"), Limits{})
	if err != nil {
		b.Fatal(err)
	}
	obj := newObjects(b)
	res, err := Build(context.Background(), BuildInput{Source: src, AgentSlug: "support-desk"}, obj, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := OpenBundle(context.Background(), obj, res.BundleKey); err != nil {
			b.Fatal(err)
		}
	}
}
