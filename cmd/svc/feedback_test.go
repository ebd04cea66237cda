package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// agentPost posts body to path on the agent host <label>.apps.localhost with a runtime token and
// returns the status and the decoded answer.
func agentPost(t *testing.T, p *benchPlatform, label, path, token string, body any) (int, map[string]any) {
	t.Helper()
	var out map[string]any
	status := upCall(t, p, label, token, "POST", path, body, &out)
	return status, out
}

// TestFeedback: a rating given on an agent's runtime is kept with the session's metadata and
// listed on the platform API, filtered by the metadata keys userId and screen, as the agent's
// sessions are.
func TestFeedback(t *testing.T) {
	p := startPlatform(t)
	a := newAgent(t, p, "rated", true)
	deployDir(t, p, a.AgentID, chatAgentDir(t), "production")
	token := runtimeToken(t, p, a.AgentID)
	chat := func(meta map[string]string) string {
		t.Helper()
		status, out := agentPost(t, p, "rated", "/chat/sync", token, map[string]any{"message": "hi", "metadata": meta})
		if status != 200 {
			t.Fatalf("chat: %d %v", status, out)
		}
		return out["session_id"].(string)
	}
	s1 := chat(map[string]string{"userId": "u1", "screen": "home"})
	s2 := chat(map[string]string{"userId": "u2", "screen": "cart"})
	for _, f := range []map[string]any{
		{"session_id": s1, "rating": "up"},
		{"session_id": s2, "rating": "down", "comment": "wrong plan"},
	} {
		if status, out := agentPost(t, p, "rated", "/feedback", token, f); status != 201 || !strings.HasPrefix(out["feedback_id"].(string), "fb_") {
			t.Fatalf("feedback %v: %d %v", f, status, out)
		}
	}
	for body, field := range map[string]string{
		`{"session_id": "` + s1 + `", "rating": "meh"}`: "rating",
		`{"rating": "up"}`: "session_id",
		`{"session_id": "` + s1 + `", "rating": "up", "comment": "` + strings.Repeat("x", 2001) + `"}`: "comment",
	} {
		var raw any
		_ = json.Unmarshal([]byte(body), &raw)
		if status, out := agentPost(t, p, "rated", "/feedback", token, raw); status != 400 || out["field"] != field {
			t.Errorf("%.60s: %d %v, want 400 naming %s", body, status, out, field)
		}
	}
	if status, _ := agentPost(t, p, "rated", "/feedback", token, map[string]any{"session_id": "ses_nope", "rating": "up"}); status != 404 {
		t.Errorf("feedback on an unknown session: %d", status)
	}
	list := func(query string) []map[string]any {
		t.Helper()
		var out struct{ Feedback []map[string]any }
		if status := p.call(t, "GET", "/api/agents/"+a.AgentID+"/feedback"+query, nil, nil, &out); status != 200 {
			t.Fatalf("list %s: %d", query, status)
		}
		return out.Feedback
	}
	if all := list(""); len(all) != 2 || all[0]["sessionId"] != s2 || all[0]["comment"] != "wrong plan" {
		t.Errorf("all feedback %v", all)
	}
	if u1 := list("?userId=u1"); len(u1) != 1 || u1[0]["sessionId"] != s1 || u1[0]["metadata"].(map[string]any)["screen"] != "home" {
		t.Errorf("userId=u1: %v", u1)
	}
	if cart := list("?screen=cart"); len(cart) != 1 || cart[0]["rating"] != "down" {
		t.Errorf("screen=cart: %v", cart)
	}
	if none := list("?userId=u1&screen=cart"); len(none) != 0 {
		t.Errorf("userId=u1&screen=cart: %v", none)
	}
	// The platform lists the sessions by the same metadata keys.
	var sessions struct {
		Sessions []map[string]any
	}
	if status := p.call(t, "GET", "/api/agents/"+a.AgentID+"/sessions?userId=u2", nil, nil, &sessions); status != 200 ||
		len(sessions.Sessions) != 1 || sessions.Sessions[0]["sessionId"] != s2 || sessions.Sessions[0]["metadata"].(map[string]any)["screen"] != "cart" {
		t.Errorf("sessions of u2: %d %v", status, sessions.Sessions)
	}
	if status := p.call(t, "GET", "/api/agents/"+a.AgentID+"/sessions", nil, nil, &sessions); status != 200 || len(sessions.Sessions) != 2 {
		t.Errorf("all sessions: %d %v", status, sessions.Sessions)
	}
	if status := p.call(t, "GET", "/api/agents/"+a.AgentID+"/feedback?limit=501", nil, nil, nil); status != 400 {
		t.Errorf("limit=501: %d", status)
	}
}
