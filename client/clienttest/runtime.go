package clienttest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"svc/client"
)

func (p *Platform) mint(w http.ResponseWriter, r *http.Request) {
	var req client.TokenRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		writeError(w, &client.Error{Status: 400, Code: client.CodeInvalidRequest, Message: "body: " + err.Error()})
		return
	}
	ttl := req.TTLSeconds
	if ttl == 0 {
		ttl = 3600
	}
	if ttl < 60 || ttl > 86400 {
		writeError(w, &client.Error{Status: 400, Code: client.CodeInvalidRequest, Message: "ttl: want 60 to 86400 seconds"})
		return
	}
	p.mu.Lock()
	tok := p.nextID("rt_")
	p.runtime[tok] = true
	exp := p.now.Add(time.Duration(ttl) * time.Second)
	p.mu.Unlock()
	writeJSON(w, 201, client.RuntimeToken{Token: tok, ExpiresAt: exp})
}

// serveRuntime answers the runtime routes of an agent host label (<slug> or <deployId>--<slug>).
func (p *Platform) serveRuntime(w http.ResponseWriter, r *http.Request, label string) {
	if _, slug, ok := strings.Cut(label, "--"); ok {
		label = slug
	}
	p.mu.Lock()
	known := false
	for _, a := range p.agents {
		known = known || a.Slug == label
	}
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	authorized := p.runtime[tok]
	p.mu.Unlock()
	switch {
	case !known:
		writeError(w, notFound("agent "+label))
		return
	case !authorized:
		writeError(w, &client.Error{Status: 401, Code: client.CodeUnauthenticated, Message: "runtime token required"})
		return
	case r.Method != http.MethodPost || r.URL.Path != "/chat/stream":
		writeError(w, notFound("route "+r.URL.Path))
		return
	}
	var req client.ChatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, &client.Error{Status: 400, Code: client.CodeInvalidRequest, Message: "body: " + err.Error()})
		return
	}
	p.mu.Lock()
	p.chats = append(p.chats, req)
	n := len(p.chats)
	chat := p.chat
	p.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	flusher, _ := w.(http.Flusher)
	write := func(chunk string) {
		if _, err := io.WriteString(w, chunk); err == nil && flusher != nil {
			flusher.Flush()
		}
	}
	if chat != nil {
		chat(req, write)
		return
	}
	session := req.SessionID
	if session == "" {
		session = fmt.Sprintf("s%d", n)
	}
	write(Frame(map[string]any{"type": "init", "session_id": session}))
	write(Frame(map[string]any{"type": "text_delta", "content": "echo: " + req.Message}))
	write(Frame(map[string]any{"type": "done", "reason": "model_stop", "turns": 1}))
}
