package deploy_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gorm.io/gorm"

	"svc/deploy"
	"svc/migrations/dbtest"
	"svc/registry"
)

func newEvals(e *env, publicURL string) *deploy.Evals {
	return deploy.NewEvals(deploy.EvalsConfig{
		Deployments: e.stores.Deployments, Runs: e.stores.EvalRuns, Statuses: e.stores.CommitStatuses, Sources: e.stores.Sources,
		Secrets: e.stores.Secrets, Objects: e.objects, Queue: e.queue, PublicURL: publicURL,
	})
}

// TestEvalsAfterBuild: a build of a git commit whose agent has evals queues them and holds the
// commit's svc/evals status pending; an agent without evals queues nothing.
func TestEvalsAfterBuild(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		e := newEnv(t, db, nil)
		t.Setenv("SUPPORT_DB_URL", t.TempDir()+"/stores.db")
		ev := newEvals(e, "")
		for _, tt := range []struct {
			fixture string
			queued  bool
		}{{"support-desk", true}, {"hello", false}} {
			repo, c, a := e.gitAgent(t, tt.fixture, tt.fixture, true)
			repo.Branch(t, "feature/x")
			out, err := e.deployer.Push(ctx, a.ID, push("feature/x", c))
			if err != nil {
				t.Fatal(err)
			}
			if d := e.wait(t, out.DeployID); !d.Serving() {
				t.Fatalf("%s: deployment = %+v\nlog:\n%s", tt.fixture, d, e.logText(t, out.BuildID))
			}
			line := ev.AfterBuild(ctx, out.DeployID)
			if !tt.queued {
				if line != "" {
					t.Errorf("%s: AfterBuild = %q, want nothing queued", tt.fixture, line)
				}
				continue
			}
			r, err := e.stores.EvalRuns.Latest(ctx, out.DeployID)
			if err != nil {
				t.Fatal(err)
			}
			if want := "2 evals queued (run " + r.ID + "); the svc/evals status of the commit is pending"; line != want {
				t.Errorf("%s: AfterBuild = %q, want %q", tt.fixture, line, want)
			}
			if st, err := e.stores.CommitStatuses.Latest(ctx, a.ID, c, registry.EvalsContext); err != nil || st.State != registry.StatePending {
				t.Errorf("%s: svc/evals status = %+v, %v; want pending", tt.fixture, st, err)
			}
		}
	})
}

// TestEvalsPost posts a status to the agent's Gitea host with its token and a link to the run.
func TestEvalsPost(t *testing.T) {
	var mu sync.Mutex
	var got []map[string]string
	var auths []string
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m map[string]string
		_ = json.Unmarshal(body, &m)
		mu.Lock()
		got, auths = append(got, m), append(auths, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	defer host.Close()
	ctx := context.Background()
	e := newEnv(t, dbtest.SQLite(t), nil)
	a, err := e.stores.Agents.Create(ctx, "posted", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.stores.Sources.Put(ctx, a.ID, registry.SourceSpec{Type: registry.SourceGit, URL: host.URL + "/acme/desk.git", DefaultBranch: "main"}); err != nil {
		t.Fatal(err)
	}
	if err := e.stores.Secrets.Put(ctx, a.ID, "GITEA_TOKEN", "tok"); err != nil {
		t.Fatal(err)
	}
	commit := strings.Repeat("a", 40)
	newEvals(e, "https://svc.example").Post(ctx, registry.EvalRun{AgentID: a.ID, DeployID: "d1", CommitSHA: commit}, "success", "evals of deployment d1: success")
	want := []map[string]string{{"state": "success", "context": registry.EvalsContext, "description": "evals of deployment d1: success", "target_url": "https://svc.example/api/deployments/d1/evals"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("posted statuses (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"POST /api/v1/repos/acme/desk/statuses/" + commit + " token tok"}, auths); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}
