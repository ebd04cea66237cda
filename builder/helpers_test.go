package builder

import (
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"svc/agent/agenttest"
	"svc/registry"
	"svc/registry/fsobjects"
)

// fixtureFiles reads every file of a shared example agent, by slash path.
func fixtureFiles(tb testing.TB, name string) map[string]string { return agenttest.Files(tb, name) }

// newObjects returns a filesystem object store in a temporary folder.
func newObjects(tb testing.TB) registry.Objects {
	tb.Helper()
	s, err := fsobjects.New(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	return registry.Checked(s)
}

// testRepo is a git repository on disk made with go-git, with a worktree.
type testRepo struct {
	tb   testing.TB
	dir  string
	repo *git.Repository
	when time.Time
}

// newTestRepo initialises a repository whose default branch is main.
func newTestRepo(tb testing.TB) *testRepo {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "repo")
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return &testRepo{tb: tb, dir: dir, repo: repo, when: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
}

// url is the repository's file:// URL.
func (r *testRepo) url() string { return "file://" + r.dir }

// write writes files into the worktree (a nil-content entry removes the file).
func (r *testRepo) write(files map[string]string) {
	r.tb.Helper()
	for p, content := range files {
		full := filepath.Join(r.dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			r.tb.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			r.tb.Fatal(err)
		}
	}
}

// symlink creates a symbolic link in the worktree.
func (r *testRepo) symlink(p, target string) {
	r.tb.Helper()
	full := filepath.Join(r.dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		r.tb.Fatal(err)
	}
	if err := os.Symlink(target, full); err != nil {
		r.tb.Fatal(err)
	}
}

// commit stages everything and commits it on the current branch.
func (r *testRepo) commit(msg string) string {
	r.tb.Helper()
	wt, err := r.repo.Worktree()
	if err != nil {
		r.tb.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		r.tb.Fatal(err)
	}
	r.when = r.when.Add(time.Minute)
	sig := &object.Signature{Name: "Test", Email: "test@example.com", When: r.when}
	h, err := wt.Commit(msg, &git.CommitOptions{Author: sig, Committer: sig})
	if err != nil {
		r.tb.Fatal(err)
	}
	return h.String()
}

// checkout switches the worktree to branch, creating it at the current head when create is true.
func (r *testRepo) checkout(branch string, create bool) {
	r.tb.Helper()
	wt, err := r.repo.Worktree()
	if err != nil {
		r.tb.Fatal(err)
	}
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName(branch), Create: create}); err != nil {
		r.tb.Fatal(err)
	}
}

// setConfig sets a git config value of the repository (for git-upload-pack).
func (r *testRepo) setConfig(section, key, value string) {
	r.tb.Helper()
	cfg, err := r.repo.Config()
	if err != nil {
		r.tb.Fatal(err)
	}
	cfg.Raw.Section(section).SetOption(key, value)
	if err := r.repo.SetConfig(cfg); err != nil {
		r.tb.Fatal(err)
	}
}

// fixtureRepo makes a repository whose main branch holds the fixture.
func fixtureRepo(tb testing.TB, fixture string) (*testRepo, string) {
	tb.Helper()
	r := newTestRepo(tb)
	r.write(fixtureFiles(tb, fixture))
	return r, r.commit("add " + fixture)
}

// gitHTTPServer serves the repositories under root over smart HTTP with `git http-backend` (CGI),
// on 127.0.0.1. When user is not empty, requests need that basic auth user and password.
func gitHTTPServer(tb testing.TB, root, user, password string) *httptest.Server {
	tb.Helper()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		tb.Skipf("git is not installed: %v", err)
	}
	backend := &cgi.Handler{
		Path: gitBin,
		Args: []string{"http-backend"},
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if user != "" {
			u, p, ok := req.BasicAuth()
			if !ok || u != user || p != password {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		backend.ServeHTTP(w, req)
	})
	srv := httptest.NewServer(handler)
	tb.Cleanup(srv.Close)
	return srv
}
