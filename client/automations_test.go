package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"svc/client"
)

// pagedRuntime answers the automation list routes in pages of two, keyed by an index cursor,
// and records the query and bearer of each request.
type pagedRuntime struct {
	mu       sync.Mutex
	queries  []string
	bearers  []string
	names    []string // the automations, newest first
	runs     int      // how many runs the one automation has
	maxLimit int      // the largest limit asked for
}

func (p *pagedRuntime) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queries = append(p.queries, r.URL.RawQuery)
	p.bearers = append(p.bearers, r.Header.Get("Authorization"))
	from, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
	size := 2
	if l := r.URL.Query().Get("limit"); l != "" {
		n, _ := strconv.Atoi(l)
		p.maxLimit = max(p.maxLimit, n)
		size = min(size, n)
	}
	total := len(p.names)
	if strings.HasSuffix(r.URL.Path, "/runs") {
		total = p.runs
	}
	end := min(total, from+size)
	next := ""
	if end < total {
		next = strconv.Itoa(end)
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/automations":
		var page []client.Automation
		for _, n := range p.names[from:end] {
			page = append(page, client.Automation{ID: "id-" + n, Name: n})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"automations": page, "next_cursor": next})
	case r.URL.Path == "/api/automations/a1/runs":
		var page []client.AutomationRun
		for i := from; i < end; i++ {
			page = append(page, client.AutomationRun{Status: client.RunQueued, SessionID: fmt.Sprint("s", i)})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"runs": page, "next_cursor": next})
	default:
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"invalid_request","message":"trigger.cron: is not a cron expression","field":"trigger.cron"}`))
	}
}

// TestAutomationPages: the list follows next_cursor to the end, sends the scope on every page,
// and the runtime credential (never the platform token) as bearer; runs stop at the limit.
func TestAutomationPages(t *testing.T) {
	rt := &pagedRuntime{names: []string{"e", "d", "c", "b", "a"}, runs: 5}
	srv := httptest.NewServer(rt)
	defer srv.Close()
	c := client.New(srv.URL, "pk_platform", nil)
	ctx := context.Background()

	list, err := c.ListAutomations(ctx, srv.URL, "rt_token", "s1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range list {
		names = append(names, a.Name)
	}
	if diff := cmp.Diff(rt.names, names); diff != "" {
		t.Errorf("ListAutomations names (-want +got):\n%s", diff)
	}
	wantQueries := []string{"scope_id=s1", "cursor=2&scope_id=s1", "cursor=4&scope_id=s1"}
	if diff := cmp.Diff(wantQueries, rt.queries); diff != "" {
		t.Errorf("queries (-want +got):\n%s", diff)
	}
	for _, b := range rt.bearers {
		if b != "Bearer rt_token" {
			t.Errorf("bearer %q, want the runtime token", b)
		}
	}

	runs, err := c.AutomationRuns(ctx, srv.URL, "rt_token", "", "a1", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 || runs[2].SessionID != "s2" || rt.maxLimit > 3 {
		t.Errorf("AutomationRuns(limit 3) = %+v (largest limit asked %d), want s0..s2", runs, rt.maxLimit)
	}
	all, err := c.AutomationRuns(ctx, srv.URL, "rt_token", "", "a1", 0)
	if err != nil || len(all) != 5 {
		t.Errorf("AutomationRuns(no limit) = %d runs, %v; want 5", len(all), err)
	}

	// A refusal keeps the field the runtime named.
	_, err = c.CreateAutomation(ctx, srv.URL, "rt_token", "", json.RawMessage(`{}`))
	var e *client.Error
	if !errors.As(err, &e) || e.Status != 400 || e.Field != "trigger.cron" {
		t.Errorf("CreateAutomation refused = %v, want a 400 *Error naming trigger.cron", err)
	}
}
