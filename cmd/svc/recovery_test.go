package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"svc/agent/agenttest"
	"svc/builder/gittest"
	"svc/client"
)

// TestBuildResumesAfterKill9: svc up is killed with SIGKILL while a build fetches its source; a
// new svc up on the same data dir takes the build back at once (not after the queue's 30s lease)
// and finishes it. SVC_RECOVERY_BENCH=1 repeats it 10 times and prints the p50 for BENCHMARKS.md.
func TestBuildResumesAfterKill9(t *testing.T) {
	kills := 1
	if os.Getenv("SVC_RECOVERY_BENCH") != "" {
		kills = 10
	}
	var resumed, ready []time.Duration
	for i := range kills {
		r, d := killDuringBuild(t, fmt.Sprint("kill", i))
		resumed, ready = append(resumed, r), append(ready, d)
	}
	slices.Sort(resumed)
	slices.Sort(ready)
	t.Logf("svc up kill -9 during a build -> restarted process fetches again (resumed): p50 %v, min %v, max %v; -> deployment ready: p50 %v, max %v (%d kills; queue lease %v)",
		resumed[len(resumed)/2].Round(time.Millisecond), resumed[0].Round(time.Millisecond), resumed[len(resumed)-1].Round(time.Millisecond),
		ready[len(ready)/2].Round(time.Millisecond), ready[len(ready)-1].Round(time.Millisecond), kills, 30*time.Second)
}

// killDuringBuild runs one kill and restart and returns the times from the kill to the build's
// second fetch (resumed) and to its deployment being ready.
func killDuringBuild(t *testing.T, slug string) (resumed, ready time.Duration) {
	t.Helper()
	dataDir := t.TempDir()
	root := t.TempDir()
	gittest.Init(t, filepath.Join(root, "repo"), agenttest.Dir(t, "hello"))
	// A git server that holds the first fetch once stall is set, until release is closed, and
	// records when the next fetch arrives.
	var stall atomic.Bool
	var refetch atomic.Int64 // unix nanos of the first request after the held one
	held := make(chan struct{}, 1)
	release := make(chan struct{})
	var heldOnce atomic.Bool
	srv := gittest.HTTPServer(t, root, func(backend http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if isPackFetch(r) && stall.CompareAndSwap(true, false) {
				heldOnce.Store(true)
				held <- struct{}{}
				<-release
				http.Error(w, "gone", http.StatusServiceUnavailable)
				return
			}
			if heldOnce.Load() {
				refetch.CompareAndSwap(0, time.Now().UnixNano())
			}
			backend.ServeHTTP(w, r)
		})
	})
	// Registered after the server, so it runs before the server's Close waits for the held fetch.
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })

	c1 := startChild(t, dataDir)
	ctx := context.Background()
	a := newAgent(t, c1.benchPlatform, slug, false)
	if err := admin(c1.benchPlatform).PutSource(ctx, a.AgentID, client.SourceRequest{Type: "git", URL: srv.URL + "/repo"}); err != nil {
		t.Fatal(err)
	}
	stall.Store(true)
	rd, err := admin(c1.benchPlatform).Redeploy(ctx, client.RedeployRequest{AgentID: a.AgentID})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("the build never fetched")
	}
	c1.kill()
	killed := time.Now()

	c2 := startChild(t, dataDir)
	c2.token = c1.token
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(5 * time.Millisecond) {
		d, err := admin(c2.benchPlatform).Deployment(ctx, rd.DeployID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Settled() {
			if d.Status != "ready" {
				t.Fatalf("deployment after the restart = %+v, want ready", d)
			}
			ready = time.Since(killed)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deployment %s still %s two minutes after the restart", rd.DeployID, d.Status)
		}
	}
	at := refetch.Load()
	if at == 0 {
		t.Fatal("the build became ready without fetching again")
	}
	c2.kill()
	return time.Unix(0, at).Sub(killed), ready
}

// isPackFetch reports whether r asks the git server for a pack (a build's fetch), not only for
// the refs (the API resolving a branch): a POST to git-upload-pack that wants objects. It puts
// the body back for the backend.
func isPackFetch(r *http.Request) bool {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
		return false
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	text := body
	if r.Header.Get("Content-Encoding") == "gzip" {
		if zr, err := gzip.NewReader(bytes.NewReader(body)); err == nil {
			if plain, err := io.ReadAll(zr); err == nil {
				text = plain
			}
		}
	}
	return bytes.Contains(text, []byte("command=fetch")) || bytes.Contains(text, []byte("want "))
}
