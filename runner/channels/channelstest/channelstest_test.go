package channelstest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"svc/runner/channels/channelstest"
)

// postJSON posts body to target with an idempotency key and returns the status and the answer.
func postJSON(t *testing.T, target, auth, key, body string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Svc-Idempotency-Key", key)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer map[string]any
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &answer); err != nil {
		t.Fatalf("answer %q: %v", data, err)
	}
	return resp.StatusCode, resp.Header, answer
}

func TestSlackFake(t *testing.T) {
	s := channelstest.NewSlack(t)
	auth := "Bearer " + s.Token
	msg := `{"channel":"C1","thread_ts":"1.2","text":"hi"}`
	if status, _, a := postJSON(t, s.URL+"/chat.postMessage", auth, "k1", msg); status != 200 || a["ok"] != true || a["ts"] == "" {
		t.Errorf("postMessage = %d %v", status, a)
	}
	if _, _, a := postJSON(t, s.URL+"/chat.postMessage", "", "k2", msg); a["error"] != "not_authed" {
		t.Errorf("without token = %v", a)
	}
	if _, _, a := postJSON(t, s.URL+"/chat.postMessage", auth, "k3", `{"channel":"C1","text":"`+strings.Repeat("a", 40001)+`"}`); a["error"] != "msg_too_long" {
		t.Errorf("40,001 characters = %v", a)
	}
	if _, _, a := postJSON(t, s.URL+"/chat.postMessage", auth, "k4", `{"channel":"C1","blocks":[{"type":"section","text":{"type":"mrkdwn","text":"`+strings.Repeat("a", 3001)+`"}}]}`); a["error"] != "invalid_blocks" {
		t.Errorf("a 3,001-character section = %v", a)
	}
	s.FailNext(1, http.StatusTooManyRequests, 3*time.Second)
	if status, h, a := postJSON(t, s.URL+"/chat.postMessage", auth, "k1", msg); status != 429 || h.Get("Retry-After") != "3" || a["error"] != "ratelimited" {
		t.Errorf("planned 429 = %d %v %v", status, h, a)
	}
	s.FailNextWith(1, "channel_not_found")
	if status, _, a := postJSON(t, s.URL+"/chat.postMessage", auth, "k1", msg); status != 200 || a["error"] != "channel_not_found" {
		t.Errorf("planned ok:false = %d %v", status, a)
	}
	postJSON(t, s.URL+"/chat.postMessage", auth, "k1", msg)
	if dups := s.Duplicates(); len(dups) != 1 || dups[0] != "k1" {
		t.Errorf("Duplicates = %v, want [k1]", dups)
	}
	if n := len(s.Calls()); n != 7 {
		t.Errorf("%d calls recorded, want 7", n)
	}
}

func TestTelegramFake(t *testing.T) {
	tg := channelstest.NewTelegram(t)
	base := tg.URL + "/bot" + tg.Token
	if status, _, a := postJSON(t, base+"/sendMessage", "", "k1", `{"chat_id":5,"text":"hi"}`); status != 200 || a["ok"] != true {
		t.Errorf("sendMessage = %d %v", status, a)
	}
	if status, _, _ := postJSON(t, tg.URL+"/botWRONG/sendMessage", "", "k2", `{"chat_id":5,"text":"hi"}`); status != 401 {
		t.Errorf("wrong token = %d, want 401", status)
	}
	if _, _, a := postJSON(t, base+"/sendMessage", "", "k3", `{"chat_id":5,"text":"`+strings.Repeat("😀", 2049)+`"}`); a["description"] != "Bad Request: message is too long" {
		t.Errorf("4,098 UTF-16 units = %v", a)
	}
	long := strings.Repeat("x", 65)
	if _, _, a := postJSON(t, base+"/sendMessage", "", "k4", `{"chat_id":5,"text":"q","reply_markup":{"inline_keyboard":[[{"text":"b","callback_data":"`+long+`"}]]}}`); a["description"] != "Bad Request: BUTTON_DATA_INVALID" {
		t.Errorf("65-byte callback_data = %v", a)
	}
	tg.FailNext(1, http.StatusTooManyRequests, 4*time.Second)
	status, _, a := postJSON(t, base+"/sendMessage", "", "k1", `{"chat_id":5,"text":"hi"}`)
	params, _ := a["parameters"].(map[string]any)
	if status != 429 || params["retry_after"] != float64(4) {
		t.Errorf("planned 429 = %d %v", status, a)
	}
	if n := len(tg.Acknowledged("sendMessage")); n != 1 {
		t.Errorf("%d acknowledged, want 1", n)
	}
}

func TestDeliveries(t *testing.T) {
	ts := time.Unix(1531420618, 0)
	d := channelstest.SlackDelivery("secret", []byte(`{"type":"event_callback"}`), ts, channelstest.WithRetryNum(2))
	if d.Header.Get("X-Slack-Request-Timestamp") != "1531420618" || !strings.HasPrefix(d.Header.Get("X-Slack-Signature"), "v0=") || d.Header.Get("X-Slack-Retry-Num") != "2" {
		t.Errorf("SlackDelivery headers = %v", d.Header)
	}
	i := channelstest.SlackInteractiveDelivery("secret", []byte(`{"type":"block_actions"}`), ts)
	if form, err := url.ParseQuery(string(i.Body)); err != nil || form.Get("payload") != `{"type":"block_actions"}` {
		t.Errorf("interactive body %q", i.Body)
	}
	req, err := channelstest.TelegramDelivery("tok", []byte(`{}`)).NewRequest(t.Context(), "http://127.0.0.1/channels/telegram/webhook")
	if err != nil || req.Header.Get("X-Telegram-Bot-Api-Secret-Token") != "tok" {
		t.Fatalf("TelegramDelivery request = %v, %v", req, err)
	}
	if body, _ := io.ReadAll(req.Body); !bytes.Equal(body, []byte(`{}`)) {
		t.Errorf("request body %q", body)
	}
	if len(channelstest.Fixture(t, "slack/app_mention.json")) == 0 {
		t.Error("empty fixture")
	}
}
