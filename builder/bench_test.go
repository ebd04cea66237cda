package builder

import (
	"context"
	"testing"

	"svc/bundle"
)

// BenchmarkBuildSupportDesk builds support-desk from an in-memory tree into a filesystem store:
// validate (agent.Load with its esbuild compile), compile, pack; the upload is skipped after the
// first iteration since the bundle is the same.
func BenchmarkBuildSupportDesk(b *testing.B) {
	src, err := bundle.FromFiles(fixtureFiles(b, "support-desk"), bundle.Limits{})
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

// BenchmarkOpenBundle reads, verifies and loads a support-desk bundle from a filesystem store, as
// the build's verify step and a runner do (OpenStored).
func BenchmarkOpenBundle(b *testing.B) {
	src, err := bundle.FromFiles(fixtureFiles(b, "support-desk"), bundle.Limits{})
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
		if _, _, err := OpenStored(context.Background(), obj, res.BundleKey); err != nil {
			b.Fatal(err)
		}
	}
}
