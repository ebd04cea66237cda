package builder

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
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

// tarEntry is one entry of a test archive.
type tarEntry struct {
	name     string
	body     string
	size     int64 // when body is empty and size > 0, that many zero bytes
	typeflag byte  // tar.TypeReg when 0
	link     string
	mode     int64
	mtime    time.Time
}

// makeTarGz builds a gzip-compressed tar archive of entries, in the order given.
func makeTarGz(tb testing.TB, entries []tarEntry) []byte {
	tb.Helper()
	var buf bytes.Buffer
	// Stored blocks: the archives of the limit tests are 50 MiB of zeros, cheap to copy, slow to deflate under -race.
	zw, err := gzip.NewWriterLevel(&buf, gzip.NoCompression)
	if err != nil {
		tb.Fatal(err)
	}
	tw := tar.NewWriter(zw)
	zeros := make([]byte, 1<<20)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typeflag, Linkname: e.link, Mode: e.mode, ModTime: e.mtime}
		if hdr.Typeflag == 0 {
			hdr.Typeflag = tar.TypeReg
		}
		if hdr.Mode == 0 {
			hdr.Mode = 0o644
		}
		if hdr.Typeflag == tar.TypeReg {
			hdr.Size = int64(len(e.body))
			if e.body == "" {
				hdr.Size = e.size
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			tb.Fatal(err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		if e.body != "" {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				tb.Fatal(err)
			}
			continue
		}
		for left := e.size; left > 0; {
			n := min(left, int64(len(zeros)))
			if _, err := tw.Write(zeros[:n]); err != nil {
				tb.Fatal(err)
			}
			left -= n
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// filesToEntries lists files as archive entries in byte order of their paths.
func filesToEntries(files map[string]string) []tarEntry {
	entries := make([]tarEntry, 0, len(files))
	for p, body := range files {
		entries = append(entries, tarEntry{name: p, body: body})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	return entries
}
