package channelstest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf16"
)

// Slack is a fake Slack Web API: chat.postMessage, chat.update and chat.postEphemeral, checked
// against the bot token and Slack's limits and answered in Slack's shapes (HTTP 200 with
// {"ok":false,"error":...} for a refused call).
type Slack struct {
	Recorder
	// URL is the API's root, the Client's BaseURL (as https://slack.com/api).
	URL string
	// Token is the bot token the fake accepts.
	Token string

	nextTS atomic.Int64
}

// NewSlack starts a fake Slack API on 127.0.0.1, closed when t ends.
func NewSlack(t testing.TB) *Slack {
	t.Helper()
	s := &Slack{Token: "xoxb-1111-2222-test"}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL + "/api"
	return s
}

// FailNextWith makes the next n calls answer HTTP 200 {"ok":false,"error":code}, as Slack
// refuses a call ("channel_not_found", "ratelimited", "internal_error").
func (s *Slack) FailNextWith(n int, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.fails = append(s.fails, failure{status: http.StatusOK, code: code})
	}
}

// Slack's limits the fake enforces.
const (
	slackMaxText        = 40000
	slackMaxBlocks      = 50
	slackMaxSectionText = 3000
	slackMaxButtonText  = 75
	slackMaxValue       = 2000
)

func (s *Slack) serve(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	body, _ := io.ReadAll(r.Body) // a short read is a refused call below
	status, answer := s.answer(r, method, body)
	ok, _ := answer["ok"].(bool)
	s.record(r, method, body, status, ok && status == http.StatusOK)
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", answer["retry_after"].(string))
		delete(answer, "retry_after")
	}
	writeJSON(w, status, answer)
}

// answer is the status and body Slack would answer.
func (s *Slack) answer(r *http.Request, method string, body []byte) (int, map[string]any) {
	refuse := func(code string) (int, map[string]any) {
		return http.StatusOK, map[string]any{"ok": false, "error": code}
	}
	if f, ok := s.nextFailure(); ok {
		if f.code != "" {
			return refuse(f.code)
		}
		if f.status == http.StatusTooManyRequests {
			return f.status, map[string]any{"ok": false, "error": "ratelimited", "retry_after": strconv.Itoa(int(f.retryAfter.Seconds()))}
		}
		return f.status, map[string]any{"ok": false, "error": strings.ToLower(strings.ReplaceAll(http.StatusText(f.status), " ", "_"))}
	}
	switch auth := r.Header.Get("Authorization"); {
	case r.Method != http.MethodPost:
		return http.StatusMethodNotAllowed, map[string]any{"ok": false, "error": "method_not_allowed"}
	case auth == "":
		return refuse("not_authed")
	case auth != "Bearer "+s.Token:
		return refuse("invalid_auth")
	}
	var msg struct {
		Channel  string       `json:"channel"`
		User     string       `json:"user"`
		TS       string       `json:"ts"`
		ThreadTS string       `json:"thread_ts"`
		Text     string       `json:"text"`
		Blocks   []slackBlock `json:"blocks"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		return refuse("invalid_json")
	}
	if msg.Channel == "" {
		return refuse("channel_not_found")
	}
	if problem := checkSlackMessage(msg.Text, msg.Blocks); problem != "" {
		return refuse(problem)
	}
	switch method {
	case "chat.postMessage":
		ts := s.newTS()
		return http.StatusOK, map[string]any{"ok": true, "channel": msg.Channel, "ts": ts,
			"message": map[string]any{"type": "message", "text": msg.Text, "ts": ts, "thread_ts": msg.ThreadTS}}
	case "chat.update":
		if msg.TS == "" {
			return refuse("message_not_found")
		}
		return http.StatusOK, map[string]any{"ok": true, "channel": msg.Channel, "ts": msg.TS, "text": msg.Text}
	case "chat.postEphemeral":
		if msg.User == "" {
			return refuse("user_not_in_channel")
		}
		return http.StatusOK, map[string]any{"ok": true, "message_ts": s.newTS()}
	}
	return refuse("unknown_method")
}

func (s *Slack) newTS() string {
	return fmt.Sprintf("1700000000.%06d", s.nextTS.Add(1))
}

// slackBlock is what the fake checks of a block.
type slackBlock struct {
	Type string `json:"type"`
	Text *struct {
		Text string `json:"text"`
	} `json:"text"`
	Elements []struct {
		Type  string          `json:"type"`
		Text  json.RawMessage `json:"text"`
		Value string          `json:"value"`
	} `json:"elements"`
}

// checkSlackMessage returns Slack's error code for text and blocks beyond its limits, or "".
func checkSlackMessage(text string, blocks []slackBlock) string {
	switch {
	case text == "" && len(blocks) == 0:
		return "no_text"
	case utf16Len(text) > slackMaxText:
		return "msg_too_long"
	case len(blocks) > slackMaxBlocks:
		return "invalid_blocks"
	}
	for _, b := range blocks {
		if b.Text != nil && utf16Len(b.Text.Text) > slackMaxSectionText {
			return "invalid_blocks"
		}
		for _, e := range b.Elements {
			if e.Type != "button" {
				continue
			}
			var label struct {
				Text string `json:"text"`
			}
			if json.Unmarshal(e.Text, &label) != nil || label.Text == "" || utf16Len(label.Text) > slackMaxButtonText || len(e.Value) > slackMaxValue {
				return "invalid_blocks"
			}
		}
	}
	return ""
}

func utf16Len(s string) int { return len(utf16.Encode([]rune(s))) }
