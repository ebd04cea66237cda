package builder

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"svc/bundle"

	"github.com/google/go-cmp/cmp"
)

// treeFiles returns every file of fsys as a map of path to content.
func treeFiles(t *testing.T, fsys fs.FS) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		files[p] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// branchRepo is a repository with support-desk on main (two commits) and feature/x (one more).
type branchRepo struct {
	*testRepo
	first, second, feature string
}

func newBranchRepo(t *testing.T) branchRepo {
	t.Helper()
	r, first := fixtureRepo(t, "support-desk")
	r.write(map[string]string{"svc/knowledge/plans.md": "---\ndescription: Plans\n---\n# Plans\n\nChanged on main.\n"})
	second := r.commit("change plans\n\nlonger body\n")
	r.checkout("feature/x", true)
	r.write(map[string]string{"svc/knowledge/feature.md": "---\ndescription: Feature\n---\nOnly on feature/x.\n"})
	feature := r.commit("feature work")
	r.checkout("main", false)
	return branchRepo{testRepo: r, first: first, second: second, feature: feature}
}

func TestFetchGitFileURL(t *testing.T) {
	r := newBranchRepo(t)
	ctx := context.Background()

	t.Run("branch head", func(t *testing.T) {
		fsys, res, err := FetchGit(ctx, GitSource{URL: r.url(), Branch: "main"}, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		want := FetchResult{Commit: r.second, Branch: "main", Message: "change plans\n\nlonger body"}
		if diff := cmp.Diff(want, res); diff != "" {
			t.Errorf("FetchResult (-want +got):\n%s", diff)
		}
		files := treeFiles(t, fsys)
		if !strings.Contains(files["svc/knowledge/plans.md"], "Changed on main") {
			t.Errorf("plans.md = %q, want the second commit's", files["svc/knowledge/plans.md"])
		}
		if _, ok := files["svc/knowledge/feature.md"]; ok {
			t.Error("main holds feature.md")
		}
	})

	t.Run("default branch", func(t *testing.T) {
		_, res, err := FetchGit(ctx, GitSource{URL: r.url()}, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Branch != "main" || res.Commit != r.second {
			t.Errorf("FetchResult = %+v, want main at %s", res, r.second)
		}
	})

	t.Run("feature branch", func(t *testing.T) {
		fsys, res, err := FetchGit(ctx, GitSource{URL: r.url(), Branch: "feature/x"}, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Commit != r.feature || res.Branch != "feature/x" || res.Message != "feature work" {
			t.Errorf("FetchResult = %+v", res)
		}
		if _, err := fs.Stat(fsys, "svc/knowledge/feature.md"); err != nil {
			t.Error(err)
		}
	})

	t.Run("older commit, full fetch fallback", func(t *testing.T) {
		fsys, res, err := FetchGit(ctx, GitSource{URL: r.url(), Branch: "main", Commit: r.first}, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Commit != r.first || res.Message != "add support-desk" {
			t.Errorf("FetchResult = %+v, want the first commit", res)
		}
		if diff := cmp.Diff(fixtureFiles(t, "support-desk"), treeFiles(t, fsys)); diff != "" {
			t.Errorf("tree of the first commit (-want +got):\n%s", diff)
		}
	})

	t.Run("commit not on branch", func(t *testing.T) {
		_, _, err := FetchGit(ctx, GitSource{URL: r.url(), Branch: "main", Commit: r.feature}, Limits{})
		if !errors.Is(err, ErrCommitNotFound) || !strings.Contains(err.Error(), r.feature) {
			t.Fatalf("error = %v, want ErrCommitNotFound naming %s", err, r.feature)
		}
	})

	t.Run("missing branch", func(t *testing.T) {
		_, _, err := FetchGit(ctx, GitSource{URL: r.url(), Branch: "nope"}, Limits{})
		if err == nil || !strings.Contains(err.Error(), "nope") {
			t.Fatalf("error = %v, want one naming the branch", err)
		}
	})
}

func TestFetchGitShallowCommitFetch(t *testing.T) {
	r := newBranchRepo(t)
	// With this setting git-upload-pack serves any reachable commit, so the older commit comes
	// from a shallow fetch of that commit alone.
	r.setConfig("uploadpack", "allowReachableSHA1InWant", "true")
	fsys, res, err := FetchGit(context.Background(), GitSource{URL: r.url(), Branch: "main", Commit: r.first}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit != r.first {
		t.Errorf("commit = %s, want %s", res.Commit, r.first)
	}
	if diff := cmp.Diff(fixtureFiles(t, "support-desk"), treeFiles(t, fsys)); diff != "" {
		t.Errorf("tree (-want +got):\n%s", diff)
	}
}

func TestFetchGitSmartHTTP(t *testing.T) {
	r := newBranchRepo(t)
	srv := gitHTTPServer(t, filepath.Dir(r.dir), "builder", "s3cret")
	url := srv.URL + "/" + filepath.Base(r.dir)
	auth := &GitAuth{Username: "builder", Password: "s3cret"}
	ctx := context.Background()

	fsys, res, err := FetchGit(ctx, GitSource{URL: url, Branch: "main", Auth: auth}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit != r.second {
		t.Errorf("commit = %s, want %s", res.Commit, r.second)
	}
	viaFile, _, err := FetchGit(ctx, GitSource{URL: r.url(), Branch: "main"}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := mustDigest(t, fsys), mustDigest(t, viaFile); a != b {
		t.Errorf("digest over HTTP %s, over file:// %s", a, b)
	}

	fsys, res, err = FetchGit(ctx, GitSource{URL: url, Branch: "feature/x", Commit: r.first, Auth: auth}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit != r.first {
		t.Errorf("commit = %s, want %s", res.Commit, r.first)
	}
	if diff := cmp.Diff(fixtureFiles(t, "support-desk"), treeFiles(t, fsys)); diff != "" {
		t.Errorf("tree (-want +got):\n%s", diff)
	}

	for name, a := range map[string]*GitAuth{"no credentials": nil, "wrong password": {Username: "builder", Password: "nope"}} {
		_, _, err := FetchGit(ctx, GitSource{URL: url, Branch: "main", Auth: a}, Limits{})
		if err == nil || !strings.Contains(err.Error(), "credentials") {
			t.Errorf("%s: error = %v, want a credentials error", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "nope") {
			t.Errorf("%s: error %q shows the password", name, err)
		}
	}
}

// TestBranchHead lists a branch's head without fetching: over file:// and over smart HTTP with
// credentials; a missing branch is ErrBranchNotFound (permanent), refused credentials an error
// that shows no password.
func TestBranchHead(t *testing.T) {
	r := newBranchRepo(t)
	ctx := context.Background()
	for branch, want := range map[string]string{"main": r.second, "feature/x": r.feature} {
		if got, err := BranchHead(ctx, GitSource{URL: r.url(), Branch: branch}); err != nil || got != want {
			t.Errorf("BranchHead(%s) = %s, %v; want %s", branch, got, err, want)
		}
	}
	_, err := BranchHead(ctx, GitSource{URL: r.url(), Branch: "nope"})
	if !errors.Is(err, ErrBranchNotFound) || !strings.Contains(err.Error(), `"nope"`) || !Permanent(err) {
		t.Errorf("missing branch: %v, want a permanent ErrBranchNotFound naming it", err)
	}
	if _, err := BranchHead(ctx, GitSource{URL: r.url()}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("no branch: %v, want ErrInvalidInput", err)
	}

	srv := gitHTTPServer(t, filepath.Dir(r.dir), "builder", "s3cret")
	url := srv.URL + "/" + filepath.Base(r.dir)
	got, err := BranchHead(ctx, GitSource{URL: url, Branch: "main", Auth: &GitAuth{Username: "builder", Password: "s3cret"}})
	if err != nil || got != r.second {
		t.Errorf("BranchHead over HTTP = %s, %v; want %s", got, err, r.second)
	}
	withPassword := strings.Replace(url, "http://", "http://builder:nope@", 1)
	_, err = BranchHead(ctx, GitSource{URL: withPassword, Branch: "main"})
	if err == nil || strings.Contains(err.Error(), "nope") {
		t.Errorf("refused credentials: %v, want an error that hides the password", err)
	}
}

// TestFetchCommitFiles reads named files of a fetched commit without the rest of its tree: a file
// elsewhere that breaks a limit fails Tree, not Files; a missing name is left out; a link is
// resolved against the whole tree.
func TestFetchCommitFiles(t *testing.T) {
	ctx := context.Background()
	r, head := fixtureRepo(t, "hello")
	r.write(map[string]string{"svc/knowledge/big.md": strings.Repeat("b", 101)})
	r.symlink("alias.json", "svc.json")
	commit := r.commit("big file and a link")
	hello := fixtureFiles(t, "hello")
	limits := Limits{Tree: bundle.Limits{MaxFileSize: 100}}
	if int64(len(hello["svc.json"])) > limits.Tree.MaxFileSize {
		t.Fatalf("the test needs svc.json of hello under %d bytes", limits.Tree.MaxFileSize)
	}

	c, err := FetchCommit(ctx, GitSource{URL: r.url(), Branch: "main"}, limits)
	if err != nil {
		t.Fatal(err)
	}
	if res := c.Result(); res.Commit != commit || res.Branch != "main" || head == commit {
		t.Errorf("Result = %+v, want commit %s on main", res, commit)
	}
	fsys, err := c.Files(ctx, "svc.json", "missing.json")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"svc.json": hello["svc.json"]}, treeFiles(t, fsys)); diff != "" {
		t.Errorf("Files (-want +got):\n%s", diff)
	}
	if _, err := c.Tree(ctx); !errors.Is(err, bundle.ErrTooLarge) {
		t.Errorf("Tree = %v, want bundle.ErrTooLarge for the big file", err)
	}
	// A link needs the whole tree, which here breaks a limit.
	if _, err := c.Files(ctx, "alias.json"); !errors.Is(err, bundle.ErrTooLarge) {
		t.Errorf("Files of a link = %v, want the whole tree's bundle.ErrTooLarge", err)
	}
	c, err = FetchCommit(ctx, GitSource{URL: r.url(), Branch: "main"}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if fsys, err := c.Files(ctx, "alias.json"); err != nil || treeFiles(t, fsys)["alias.json"] != hello["svc.json"] {
		t.Errorf("Files of a link = %v, want a copy of svc.json", err)
	}
}

func mustDigest(t *testing.T, fsys fs.FS) string {
	t.Helper()
	d, err := bundle.Digest(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestFetchGitTreeRules(t *testing.T) {
	ctx := context.Background()
	t.Run("symlink inside is a copy", func(t *testing.T) {
		r, _ := fixtureRepo(t, "hello")
		r.symlink("docs/readme.md", "../agents/default/AGENT.md")
		r.commit("link")
		fsys, _, err := FetchGit(ctx, GitSource{URL: r.url()}, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		files := treeFiles(t, fsys)
		if files["docs/readme.md"] != files["agents/default/AGENT.md"] || files["docs/readme.md"] == "" {
			t.Errorf("docs/readme.md = %q, want a copy of AGENT.md", files["docs/readme.md"])
		}
	})
	t.Run("symlink leaving the tree", func(t *testing.T) {
		r, _ := fixtureRepo(t, "hello")
		r.symlink("svc/knowledge/secret.md", "../../../etc/passwd")
		r.commit("escape")
		_, _, err := FetchGit(ctx, GitSource{URL: r.url()}, Limits{})
		if !errors.Is(err, bundle.ErrUnsafePath) || !strings.HasPrefix(err.Error(), "svc/knowledge/secret.md: ") {
			t.Fatalf("error = %v, want bundle.ErrUnsafePath naming svc/knowledge/secret.md", err)
		}
	})
	t.Run("absolute symlink", func(t *testing.T) {
		r, _ := fixtureRepo(t, "hello")
		r.symlink("abs", "/etc/passwd")
		r.commit("escape")
		_, _, err := FetchGit(ctx, GitSource{URL: r.url()}, Limits{})
		if !errors.Is(err, bundle.ErrUnsafePath) || !strings.HasPrefix(err.Error(), "abs: ") {
			t.Fatalf("error = %v, want bundle.ErrUnsafePath naming abs", err)
		}
	})
	t.Run("file over the limit", func(t *testing.T) {
		r, _ := fixtureRepo(t, "hello")
		r.write(map[string]string{"svc/knowledge/a.md": strings.Repeat("a", 100), "svc/knowledge/b.md": strings.Repeat("b", 101)})
		r.commit("big")
		limits := Limits{Tree: bundle.Limits{MaxFileSize: 100}}
		_, _, err := FetchGit(ctx, GitSource{URL: r.url()}, limits)
		var se *bundle.SourceError
		if !errors.Is(err, bundle.ErrTooLarge) || !errors.As(err, &se) || se.Path != "svc/knowledge/b.md" {
			t.Fatalf("error = %v, want bundle.ErrTooLarge for svc/knowledge/b.md", err)
		}
	})
	t.Run("too many files", func(t *testing.T) {
		r, _ := fixtureRepo(t, "hello")
		files := fixtureFiles(t, "hello")
		_, _, err := FetchGit(ctx, GitSource{URL: r.url()}, Limits{Tree: bundle.Limits{MaxFiles: len(files)}})
		if err != nil {
			t.Fatalf("at the file limit: %v", err)
		}
		_, _, err = FetchGit(ctx, GitSource{URL: r.url()}, Limits{Tree: bundle.Limits{MaxFiles: len(files) - 1}})
		if !errors.Is(err, bundle.ErrTooManyFiles) {
			t.Fatalf("error = %v, want bundle.ErrTooManyFiles", err)
		}
	})
}

func TestFetchGitInvalidInput(t *testing.T) {
	r, _ := fixtureRepo(t, "hello")
	tests := []struct {
		name string
		src  GitSource
		want string
	}{
		{"empty URL", GitSource{}, "URL is empty"},
		{"ssh URL", GitSource{URL: "ssh://git@example.com/x.git"}, `scheme "ssh"`},
		{"scp-like", GitSource{URL: "git@example.com:x.git"}, "URL"},
		{"plain path", GitSource{URL: r.dir}, `scheme ""`},
		{"no host", GitSource{URL: "https:///x.git"}, "no host"},
		{"short commit", GitSource{URL: r.url(), Commit: "abc123"}, `commit "abc123"`},
		{"upper-case commit", GitSource{URL: r.url(), Commit: strings.Repeat("A", 40)}, "commit"},
		{"bad branch", GitSource{URL: r.url(), Branch: "a..b"}, `branch "a..b"`},
		{"ref branch", GitSource{URL: r.url(), Branch: "refs/heads/main"}, "branch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := FetchGit(context.Background(), tt.src, Limits{})
			if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want ErrInvalidInput mentioning %q", err, tt.want)
			}
		})
	}
	t.Run("password not shown", func(t *testing.T) {
		for _, u := range []string{"ftp://user:hunter2@example.com/x", "https://user:hunter2@example.com/%zz"} {
			_, _, err := FetchGit(context.Background(), GitSource{URL: u}, Limits{})
			if err == nil || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error = %v, want one without the password", err)
			}
		}
	})
}

func TestFetchGitCancelled(t *testing.T) {
	r, _ := fixtureRepo(t, "hello")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := FetchGit(ctx, GitSource{URL: r.url()}, Limits{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
	_, _, err := FetchGit(context.Background(), GitSource{URL: r.url()}, Limits{Timeout: 1})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("error = %v, want ErrTimeout", err)
	}
}

func TestFetchGitMissingRepository(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none")
	_, _, err := FetchGit(context.Background(), GitSource{URL: "file://" + missing}, Limits{})
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("error = %v, want one naming %s", err, missing)
	}
	empty := newTestRepo(t)
	if _, _, err := FetchGit(context.Background(), GitSource{URL: empty.url()}, Limits{}); err == nil {
		t.Fatal("fetch of an empty repository succeeded")
	}
	_ = os.RemoveAll(missing)
}

// TestPermanentFetchErrors: what retrying cannot mend is Permanent, what may pass is not.
func TestPermanentFetchErrors(t *testing.T) {
	r := newBranchRepo(t)
	ctx := context.Background()
	closed := "http://" + closedAddr(t) + "/repo.git"
	tests := []struct {
		name      string
		src       GitSource
		permanent bool
	}{
		{"commit not on branch", GitSource{URL: r.url(), Branch: "main", Commit: r.feature}, true},
		{"missing commit", GitSource{URL: r.url(), Branch: "main", Commit: strings.Repeat("0", 40)}, true},
		{"missing branch", GitSource{URL: r.url(), Branch: "nope"}, true},
		{"missing repository", GitSource{URL: "file://" + t.TempDir() + "/none.git"}, true},
		{"bad URL", GitSource{URL: "ftp://example/x"}, true},
		{"connection refused", GitSource{URL: closed}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := FetchGit(ctx, tt.src, Limits{})
			if err == nil {
				t.Fatal("FetchGit succeeded")
			}
			if got := Permanent(err); got != tt.permanent {
				t.Errorf("Permanent(%v) = %v, want %v", err, got, tt.permanent)
			}
		})
	}
}

// closedAddr is a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
