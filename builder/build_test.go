package builder

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"svc/agent"
	"svc/agent/agenttest"
	"svc/bundle"
	"svc/bundle/bundletest"
	"svc/registry"
)

// logLines collects the lines Build logs, as "step: line".
type logLines []string

func (l *logLines) log(step, line string) { *l = append(*l, step+": "+line) }

func (l logLines) text() string { return strings.Join(l, "\n") }

func readObject(t *testing.T, obj registry.Objects, key string) []byte {
	t.Helper()
	rc, _, err := obj.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close() //nolint:errcheck // test read
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func stepNames(steps []Step) []string {
	var s []string
	for _, st := range steps {
		s = append(s, st.Name+"="+st.Status)
	}
	return s
}

func TestBuildFixturesFromGit(t *testing.T) {
	tests := []struct {
		fixture string
		tools   []bundle.ManifestTool
		agents  []string
	}{
		{"hello", []bundle.ManifestTool{}, []string{"default"}},
		{"support-desk", []bundle.ManifestTool{
			{Name: "refund_request", Execution: "durable", Layout: "handler"},
			{Name: "triage", Execution: "inline", Layout: "handler"},
		}, []string{"billing", "default"}},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			ctx := context.Background()
			r, commit := fixtureRepo(t, tt.fixture)
			r.checkout("feature/x", true)
			src, fetched, err := FetchGit(ctx, GitSource{URL: r.url(), Branch: "feature/x", Commit: commit}, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			obj := newObjects(t)
			var log logLines
			res, err := Build(ctx, BuildInput{
				Source: src, Commit: fetched.Commit, Branch: fetched.Branch, SourceVersionID: "", AgentSlug: tt.fixture,
			}, obj, log.log)
			if err != nil {
				t.Fatalf("Build: %v\nlog:\n%s", err, log.text())
			}
			want := []string{"validate=succeeded", "compile=succeeded", "pack=succeeded", "upload=succeeded", "verify=succeeded"}
			if diff := cmp.Diff(want, stepNames(res.Steps)); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
			digest, err := bundle.Digest(os.DirFS(agenttest.Dir(t, tt.fixture)))
			if err != nil {
				t.Fatal(err)
			}
			wantManifest := bundle.Manifest{
				Format: bundle.Format, Digest: digest, Commit: commit, Branch: "feature/x",
				Name: tt.fixture, Version: res.Manifest.Version, Tools: tt.tools, Agents: tt.agents, CreatedBy: "svc",
			}
			if diff := cmp.Diff(wantManifest, res.Manifest); diff != "" {
				t.Errorf("manifest (-want +got):\n%s", diff)
			}
			if res.SourceDigest != digest || res.Manifest.Version == "" {
				t.Errorf("SourceDigest = %s, want %s; version %q", res.SourceDigest, digest, res.Manifest.Version)
			}
			hexDigest := strings.TrimPrefix(res.BundleDigest, "sha256:")
			if res.BundleKey != "bundles/"+tt.fixture+"/"+hexDigest+".tar.zst" || len(hexDigest) != 64 {
				t.Errorf("BundleKey = %s, BundleDigest = %s", res.BundleKey, res.BundleDigest)
			}
			if data := readObject(t, obj, res.BundleKey); int64(len(data)) != res.BundleSize || !res.Uploaded {
				t.Errorf("stored %d bytes, Result says %d (uploaded %v)", len(data), res.BundleSize, res.Uploaded)
			}
			for _, tool := range tt.tools {
				if !strings.Contains(log.text(), "compile: svc/tools/"+tool.Name+"/handler.ts → build/tools/"+tool.Name+".js") {
					t.Errorf("log has no compile line for %s:\n%s", tool.Name, log.text())
				}
			}
			if !strings.Contains(log.text(), "upload: uploaded "+res.BundleKey) {
				t.Errorf("log has no upload line:\n%s", log.text())
			}
		})
	}
}

func TestBuildDeterministic(t *testing.T) {
	ctx := context.Background()
	files := fixtureFiles(t, "support-desk")
	fromMap, err := bundle.FromFiles(files, bundle.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	// The same files in reverse archive order, with other modes and times.
	entries := bundletest.Entries(files)
	slices.Reverse(entries)
	for i := range entries {
		entries[i].Mode = 0o600
		entries[i].ModTime = entries[i].ModTime.AddDate(1, 0, i)
	}
	fromTar, err := bundle.ReadTarGz(bytes.NewReader(bundletest.TarGz(t, entries)), bundle.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	in := BuildInput{Commit: strings.Repeat("a", 40), Branch: "main", SourceVersionID: "sv_1", AgentSlug: "support-desk"}
	obj := newObjects(t)

	var results []Result
	var bundles [][]byte
	for _, src := range []namedFS{{"map", fromMap}, {"tar", fromTar}, {"dir", os.DirFS(agenttest.Dir(t, "support-desk"))}} {
		in.Source = src.fsys
		res, err := Build(ctx, in, obj, nil)
		if err != nil {
			t.Fatalf("%s: %v", src.name, err)
		}
		results = append(results, res)
		bundles = append(bundles, readObject(t, obj, res.BundleKey))
	}
	for i := 1; i < len(results); i++ {
		if results[i].BundleKey != results[0].BundleKey || !bytes.Equal(bundles[i], bundles[0]) {
			t.Errorf("build %d: key %s, build 0: key %s; bytes equal: %v", i, results[i].BundleKey, results[0].BundleKey, bytes.Equal(bundles[i], bundles[0]))
		}
		if results[i].Uploaded {
			t.Errorf("build %d uploaded again; want the upload skipped", i)
		}
	}
	if !results[0].Uploaded {
		t.Error("first build did not upload")
	}

	// Other metadata gives another bundle.
	in.Commit = strings.Repeat("b", 40)
	other, err := Build(ctx, in, obj, nil)
	if err != nil {
		t.Fatal(err)
	}
	if other.BundleKey == results[0].BundleKey || other.SourceDigest != results[0].SourceDigest {
		t.Errorf("another commit: key %s (first %s), source digest %s (first %s)", other.BundleKey, results[0].BundleKey, other.SourceDigest, results[0].SourceDigest)
	}
}

type namedFS struct {
	name string
	fsys fs.FS
}

func TestBuildBrokenFixture(t *testing.T) {
	obj := newObjects(t)
	var log logLines
	res, err := Build(context.Background(), BuildInput{Source: os.DirFS(agenttest.Dir(t, "broken")), AgentSlug: "broken"}, obj, log.log)
	var be *BuildError
	if !errors.As(err, &be) {
		t.Fatalf("error = %v, want a *BuildError", err)
	}
	// Every problem the fixture's README lists, by file and a word of the message.
	want := []struct{ file, word string }{
		{"svc.json", "version"},
		{"svc.json", "colour"},
		{"agents/default/agent.json", "no_such_tool"},
		{"agents/default/agent.json", "missing-skill"},
		{"agents/default/agent.json", "nope"},
		{"agents/default/agent.json", "ghost"},
		{"svc/skills/x/SKILL.md", "Skill"},
		{"svc/tools/bad/tool.json", "undeclared_child"},
		{"svc/tools/bad/tool.json", "nobody"},
		{"svc/tools/bad/handler.ts:2", ""},
	}
	for _, w := range want {
		found := false
		for _, line := range log {
			if strings.HasPrefix(line, "validate: "+w.file) && strings.Contains(line, w.word) {
				found = true
			}
		}
		if !found {
			t.Errorf("no log line for %s mentioning %q", w.file, w.word)
		}
		inErr := false
		for _, errLine := range strings.Split(err.Error(), "\n") {
			if strings.Contains(errLine, w.file) && strings.Contains(errLine, w.word) {
				inErr = true
			}
		}
		if !inErr {
			t.Errorf("error does not name %s with %q", w.file, w.word)
		}
	}
	for _, p := range be.Problems {
		if !strings.Contains(log.text(), "validate: "+p.String()) {
			t.Errorf("problem %q is not in the log", p)
		}
	}
	if t.Failed() {
		t.Logf("log:\n%s\nerror: %v", log.text(), err)
	}
	wantSteps := []string{"validate=failed", "compile=skipped", "pack=skipped", "upload=skipped", "verify=skipped"}
	if diff := cmp.Diff(wantSteps, stepNames(res.Steps)); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if res.BundleKey != "" {
		t.Errorf("BundleKey = %q after a failed build", res.BundleKey)
	}
	if infos, err := obj.List(context.Background(), ""); err != nil || len(infos) != 0 {
		t.Errorf("object store after a failed build: %v, %v; want empty", infos, err)
	}
}

func TestBuildSourceLimits(t *testing.T) {
	files := fstest.MapFS{}
	for p, body := range fixtureFiles(t, "hello") {
		files[p] = &fstest.MapFile{Data: []byte(body)}
	}
	files["svc/knowledge/big.md"] = &fstest.MapFile{Data: bytes.Repeat([]byte("x"), 1001)}
	obj := newObjects(t)
	var log logLines
	_, err := Build(context.Background(), BuildInput{Source: files, AgentSlug: "hello", Limits: Limits{Tree: bundle.Limits{MaxFileSize: 1000}}}, obj, log.log)
	var be *BuildError
	if !errors.As(err, &be) || len(be.Problems) != 1 || be.Problems[0].File != "svc/knowledge/big.md" {
		t.Fatalf("error = %v, want a BuildError naming svc/knowledge/big.md", err)
	}
	if !strings.Contains(log.text(), "validate: svc/knowledge/big.md: file is 1001 bytes") {
		t.Errorf("log:\n%s", log.text())
	}
	if infos, _ := obj.List(context.Background(), ""); len(infos) != 0 {
		t.Errorf("stored %v after a failed build", infos)
	}
}

func TestBuildInvalidInput(t *testing.T) {
	src, err := bundle.FromFiles(fixtureFiles(t, "hello"), bundle.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	obj := newObjects(t)
	for _, tt := range []struct {
		name string
		in   BuildInput
		want string
	}{
		{"no source", BuildInput{AgentSlug: "a"}, "Source"},
		{"empty slug", BuildInput{Source: src}, `slug ""`},
		{"upper-case slug", BuildInput{Source: src, AgentSlug: "Hello"}, `slug "Hello"`},
		{"slug with slash", BuildInput{Source: src, AgentSlug: "a/b"}, `slug "a/b"`},
		{"trailing hyphen", BuildInput{Source: src, AgentSlug: "a-"}, `slug "a-"`},
		{"slug too long", BuildInput{Source: src, AgentSlug: strings.Repeat("a", 64)}, "slug"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(context.Background(), tt.in, obj, nil)
			if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want ErrInvalidInput mentioning %q", err, tt.want)
			}
		})
	}
	if _, err := Build(context.Background(), BuildInput{Source: src, AgentSlug: strings.Repeat("a", 63)}, obj, nil); err != nil {
		t.Errorf("63-letter slug: %v", err)
	}
}

func TestBuildCancelled(t *testing.T) {
	src, err := bundle.FromFiles(fixtureFiles(t, "hello"), bundle.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	obj := newObjects(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	errStop := errors.New("operator stopped the build")
	cancel(errStop)
	var log logLines
	res, err := Build(ctx, BuildInput{Source: src, AgentSlug: "hello"}, obj, log.log)
	if !errors.Is(err, errStop) {
		t.Fatalf("error = %v, want the cancellation cause", err)
	}
	wantSteps := []string{"validate=skipped", "compile=skipped", "pack=skipped", "upload=skipped", "verify=skipped"}
	if diff := cmp.Diff(wantSteps, stepNames(res.Steps)); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if !strings.Contains(log.text(), "operator stopped the build") {
		t.Errorf("log does not say why:\n%s", log.text())
	}
	_, err = Build(context.Background(), BuildInput{Source: src, AgentSlug: "hello", Limits: Limits{Timeout: 1}}, obj, nil)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("error = %v, want ErrTimeout", err)
	}
	if infos, _ := obj.List(context.Background(), ""); len(infos) != 0 {
		t.Errorf("stored %v after cancelled builds", infos)
	}
}

func TestBuildReplacesObjectOfOtherSize(t *testing.T) {
	ctx := context.Background()
	src, err := bundle.FromFiles(fixtureFiles(t, "hello"), bundle.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	obj := newObjects(t)
	res, err := Build(ctx, BuildInput{Source: src, AgentSlug: "hello"}, obj, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := obj.Put(ctx, res.BundleKey, strings.NewReader("truncated"), 9); err != nil {
		t.Fatal(err)
	}
	again, err := Build(ctx, BuildInput{Source: src, AgentSlug: "hello"}, obj, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Uploaded || int64(len(readObject(t, obj, res.BundleKey))) != res.BundleSize {
		t.Errorf("a stored object of another size was not replaced")
	}
}

// flippingObjects stores every object with its last byte flipped: a store that corrupts what it
// is given, as a broken disk or a proxy could.
type flippingObjects struct{ registry.Objects }

func (f flippingObjects) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	data[len(data)-1] ^= 0xff
	return f.Objects.Put(ctx, key, bytes.NewReader(data), size)
}

// TestBuildVerifiesTheStoredBundle: a bundle that does not open from the store as a runner opens
// it fails the build, naming the reason, and the build reports no bundle.
func TestBuildVerifiesTheStoredBundle(t *testing.T) {
	src, err := bundle.FromFiles(fixtureFiles(t, "hello"), bundle.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	res, err := Build(context.Background(), BuildInput{Source: src, AgentSlug: "hello"}, flippingObjects{newObjects(t)},
		func(step, line string) { lines = append(lines, step+": "+line) })
	if err == nil || !errors.Is(err, bundle.ErrBadBundle) || !strings.Contains(err.Error(), "does not open as a runner opens it") {
		t.Fatalf("Build = %v, want a verify failure wrapping bundle.ErrBadBundle", err)
	}
	if res.BundleKey != "" || res.Steps[len(res.Steps)-1] != (Step{Name: StepVerify, Status: StepFailed, Duration: res.Steps[len(res.Steps)-1].Duration}) {
		t.Errorf("result = %+v, want no bundle and a failed verify step", res)
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "verify: error: ") {
		t.Errorf("last log line = %q, want the verify error", last)
	}
}

// TestBuildWarnsAboutUnsetReferences: every env: reference that does not resolve is a warning
// of the verify step, in the log and the result, and never fails the build; one that resolves
// (here STATUS_API_URL) is not mentioned; a check that fails is a warning too.
func TestBuildWarnsAboutUnsetReferences(t *testing.T) {
	src, err := bundle.FromFiles(fixtureFiles(t, "support-desk"), bundle.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	isSet := func(_ context.Context, name string) (bool, error) {
		asked = append(asked, name)
		switch name {
		case "STATUS_API_URL":
			return true, nil
		case "STATUS_API_TOKEN":
			return false, errors.New("the secrets are unreachable")
		}
		return false, nil
	}
	var lines []string
	res, err := Build(context.Background(), BuildInput{Source: src, AgentSlug: "desk", IsSet: isSet}, newObjects(t),
		func(step, line string) { lines = append(lines, step+": "+line) })
	if err != nil {
		t.Fatalf("Build = %v, want success", err)
	}
	want := []string{
		"env:SUPPORT_DB_URL (svc.json stores.url) is not set: the store tools and store routes will fail until it is; " +
			"set it with `svc secrets set desk SUPPORT_DB_URL` or in the runner's environment",
		"env:STATUS_API_TOKEN (svc/connections/status/spec.json auth.headers.Authorization) could not be checked: the secrets are unreachable",
	}
	if diff := cmp.Diff(want, res.Warnings); diff != "" {
		t.Errorf("Warnings (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"SUPPORT_DB_URL", "STATUS_API_URL", "STATUS_API_TOKEN"}, asked); diff != "" {
		t.Errorf("names checked (-want +got):\n%s", diff)
	}
	n := len(lines)
	if diff := cmp.Diff([]string{"verify: the stored bundle opens and loads as a runner loads it", "verify: warning: " + want[0], "verify: warning: " + want[1]}, lines[n-3:]); diff != "" {
		t.Errorf("last log lines (-want +got):\n%s", diff)
	}

	// Without IsSet nothing is checked.
	res, err = Build(context.Background(), BuildInput{Source: src, AgentSlug: "desk"}, newObjects(t), nil)
	if err != nil || res.Warnings != nil {
		t.Errorf("Build without IsSet = %v, warnings %q; want none", err, res.Warnings)
	}
}

func TestUnsetRefsGroupsANameUsedTwice(t *testing.T) {
	ag := &agent.Agent{Config: agent.Config{Models: map[string]agent.ModelRef{
		"main": {Provider: agent.ProviderOpenAI, Model: "m"},
		"alt":  {Provider: agent.ProviderOpenAI, Model: "n", APIKey: "env:OPENAI_API_KEY"},
	}}}
	got := unsetRefs(context.Background(), ag, "a", func(context.Context, string) (bool, error) { return false, nil })
	want := []string{"env:OPENAI_API_KEY (svc.json models.alt.apiKey, svc.json models.main, which names no apiKey) is not set: " +
		"model alt and model main will fail until it is; set it with `svc secrets set a OPENAI_API_KEY` or in the runner's environment"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("unsetRefs (-want +got):\n%s", diff)
	}
}
