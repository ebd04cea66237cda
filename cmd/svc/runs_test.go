package main

import (
	"context"
	"net/http"
	"testing"

	"svc/client"
	"svc/runner/models/modelstest"
)

// TestRuns: every chat turn on a deployed agent is recorded as a run, listed on the platform API
// newest first and filtered by the metadata keys userId and screen (spec 2.6), by session and by
// deployment; the verified user of the runtime token is the run's userId, whatever the metadata
// says (a metadata key svc.user.id stays metadata). Deleting a session deletes its runs.
func TestRuns(t *testing.T) {
	model := modelstest.NewOpenAIServer(t,
		modelstest.Turn{Text: []string{"Hello ", "Ann."}, Usage: modelstest.Usage{InputTokens: 20, OutputTokens: 4}},
		modelstest.Turn{Text: []string{"Your cart."}, Usage: modelstest.Usage{InputTokens: 30, OutputTokens: 3}},
		modelstest.Turn{Text: []string{"Hi Bo."}, Usage: modelstest.Usage{InputTokens: 10, OutputTokens: 3}})
	p := startPlatform(t)
	a := newAgent(t, p, "counted", true)
	d := deployDir(t, p, a.AgentID, writeTree(t, map[string]string{
		"svc.json": `{"name":"counted","version":"1","models":{"main":{"provider":"openai-compatible","model":"fake","baseUrl":"` + model.URL + `"}}}`,
	}), "production")
	tok, err := admin(p).MintRuntimeToken(context.Background(), a.AgentID, client.TokenRequest{UserID: "user-ann"})
	if err != nil {
		t.Fatal(err)
	}
	chat := func(body map[string]any) string {
		t.Helper()
		status, out := agentPost(t, p, "counted", "/chat/sync", tok.Token, body)
		if status != 200 {
			t.Fatalf("chat: %d %v", status, out)
		}
		return out["session_id"].(string)
	}
	s1 := chat(map[string]any{"message": "hi", "metadata": map[string]string{"userId": "ann", "screen": "home", "svc.user.id": "mallory"}})
	chat(map[string]any{"message": "my cart?", "session_id": s1, "metadata": map[string]string{"screen": "cart"}})
	s2 := chat(map[string]any{"message": "hi", "metadata": map[string]string{"userId": "bo", "screen": "home"}})

	type run struct {
		RunID, SessionID, DeployID, Kind, Reason, Provider, Model, UserID, AuthMethod string
		Usage                                                                         struct{ InputTokens, OutputTokens int }
		Metadata                                                                      map[string]string
	}
	list := func(query string) []run {
		t.Helper()
		var out struct{ Runs []run }
		if status := p.call(t, "GET", "/api/agents/"+a.AgentID+"/runs"+query, nil, nil, &out); status != 200 {
			t.Fatalf("runs%s: %d", query, status)
		}
		return out.Runs
	}
	all := list("")
	if len(all) != 3 || all[0].SessionID != s2 || all[1].SessionID != s1 || all[2].SessionID != s1 {
		t.Fatalf("all runs, newest first: %+v", all)
	}
	first := all[2]
	if first.UserID != "user-ann" || first.AuthMethod != "runtime_token" || first.Metadata["svc.user.id"] != "mallory" {
		t.Errorf("first run's caller %q %q, metadata %v: metadata must not set the verified user", first.UserID, first.AuthMethod, first.Metadata)
	}
	if first.DeployID != d.DeployID || first.Kind != "chat" || first.Reason != "model_stop" || first.Provider != "openai-compatible" ||
		first.Model != "fake" || first.Usage.InputTokens != 20 || first.Usage.OutputTokens != 4 || first.Metadata["screen"] != "home" {
		t.Errorf("first run %+v", first)
	}
	for query, want := range map[string][]string{
		"?userId=ann":                            {s1, s1},
		"?userId=bo":                             {s2},
		"?screen=home":                           {s2, s1},
		"?screen=cart":                           {s1},
		"?userId=ann&screen=cart":                {s1},
		"?userId=mallory":                        nil,
		"?session=" + s2:                         {s2},
		"?deployment=" + d.DeployID + "&limit=2": {s2, s1},
	} {
		got := list(query)
		var sessions []string
		for _, r := range got {
			sessions = append(sessions, r.SessionID)
		}
		if len(sessions) != len(want) || (len(want) > 0 && (sessions[0] != want[0] || sessions[len(sessions)-1] != want[len(want)-1])) {
			t.Errorf("runs%s: sessions %v, want %v", query, sessions, want)
		}
	}
	var one run
	if status := p.call(t, "GET", "/api/agents/"+a.AgentID+"/runs/"+first.RunID, nil, nil, &one); status != 200 || one.RunID != first.RunID || one.UserID != "user-ann" {
		t.Errorf("run %s: %d %+v", first.RunID, status, one)
	}
	for _, query := range []string{"?limit=501", "?userid=ann"} {
		if status := p.call(t, "GET", "/api/agents/"+a.AgentID+"/runs"+query, nil, nil, nil); status != 400 {
			t.Errorf("runs%s: %d, want 400", query, status)
		}
	}

	// Deleting a session deletes its runs.
	req, err := http.NewRequest("DELETE", p.url+"/sessions/history/"+s1, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "counted.apps.localhost"
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 {
		t.Fatalf("delete session: %d", resp.StatusCode)
	}
	if left := list(""); len(left) != 1 || left[0].SessionID != s2 {
		t.Errorf("runs after deleting %s: %+v", s1, left)
	}
}
