package githost_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"svc/githost"
)

// seen is what a fake host API received.
type seen struct {
	path, auth string
	body       map[string]string
}

func fakeHost(t *testing.T, failFirst int, status int) (*httptest.Server, func() []seen) {
	t.Helper()
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b map[string]string
		_ = json.NewDecoder(r.Body).Decode(&b)
		mu.Lock()
		got = append(got, seen{path: r.URL.EscapedPath(), auth: r.Header.Get("Authorization") + r.Header.Get("PRIVATE-TOKEN"), body: b})
		n := len(got)
		mu.Unlock()
		if n <= failFirst {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []seen { mu.Lock(); defer mu.Unlock(); return append([]seen(nil), got...) }
}

const sha = "0123456789abcdef0123456789abcdef01234567"

func TestPost(t *testing.T) {
	st := githost.Status{Commit: sha, State: "failure", Context: "svc/evals", Description: "1 of 2 evals failed", TargetURL: "http://svc/results"}
	for _, c := range []struct {
		kind, wantPath, wantAuth, stateKey, wantState, contextKey string
	}{
		{githost.GitHub, "/api/v3/repos/acme/desk/statuses/" + sha, "Bearer tok", "state", "failure", "context"},
		{githost.Gitea, "/api/v1/repos/acme/desk/statuses/" + sha, "token tok", "state", "failure", "context"},
		{githost.GitLab, "/api/v4/projects/acme%2Fdesk/statuses/" + sha, "tok", "state", "failed", "name"},
	} {
		t.Run(c.kind, func(t *testing.T) {
			srv, got := fakeHost(t, 1, http.StatusCreated) // the first answer is a 500: retried
			p := githost.Poster{Backoff: time.Millisecond}
			if err := p.Post(context.Background(), c.kind, srv.URL+"/acme/desk.git", "tok", st); err != nil {
				t.Fatal(err)
			}
			g := got()
			if len(g) != 2 {
				t.Fatalf("%d posts, want 2 (a retry after the 500)", len(g))
			}
			last := g[1]
			if last.path != c.wantPath || last.auth != c.wantAuth || last.body[c.stateKey] != c.wantState || last.body[c.contextKey] != "svc/evals" || last.body["target_url"] != "http://svc/results" {
				t.Errorf("posted %+v", last)
			}
		})
	}
}

func TestPostRefusals(t *testing.T) {
	srv, got := fakeHost(t, 0, http.StatusNotFound)
	p := githost.Poster{Backoff: time.Millisecond}
	err := p.Post(context.Background(), githost.Gitea, srv.URL+"/acme/desk", "secret-token-value", githost.Status{Commit: sha, State: "success", Context: "svc/evals"})
	if err == nil || len(got()) != 1 {
		t.Fatalf("a 404 was retried or passed: %v, %d posts", err, len(got()))
	}
	srv5, got5 := fakeHost(t, 10, http.StatusCreated)
	if err := p.Post(context.Background(), githost.GitHub, srv5.URL+"/a/b", "t", githost.Status{Commit: sha, State: "success"}); err == nil || len(got5()) != 3 {
		t.Errorf("three 500s: %v after %d posts", err, len(got5()))
	}
	for _, bad := range []string{"git@github.com:acme/desk.git", "file:///repo", "http://host/only"} {
		if err := p.Post(context.Background(), githost.GitHub, bad, "t", githost.Status{Commit: sha}); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	if err := p.Post(context.Background(), "bitbucket", srv.URL+"/a/b", "t", githost.Status{Commit: sha}); err == nil {
		t.Error("an unknown host kind posted")
	}
}
