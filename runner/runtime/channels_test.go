package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"svc/agent"
	"svc/agent/agenttest"
	"svc/migrations/dbtest"
	"svc/registry"
	"svc/runner/channels"
	"svc/runner/channels/channelstest"
	"svc/runner/channels/slack"
	"svc/runner/channels/telegram"
	"svc/runner/models"
	"svc/runner/runtime"
	"svc/runner/tools"
)

const (
	slackSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	tgSecret    = "tg-secret-token"
)

// chanQueue stands in for the platform queue: the channel tasks a runtime enqueues, in order.
// failTurns, while true, makes the enqueueing of a turn fail.
type chanQueue struct {
	tasks     chan runtime.ChannelTask
	failTurns atomic.Bool
}

func (q *chanQueue) turn(_ context.Context, _ string, m *channels.Message) error {
	if q.failTurns.Load() {
		return errors.New("the queue is down")
	}
	q.tasks <- runtime.ChannelTask{Message: m}
	return nil
}

func (q *chanQueue) send(_ context.Context, _ string, s runtime.ChannelSend) error {
	q.tasks <- runtime.ChannelTask{Send: &s}
	return nil
}

// chanEnv is a runtime with Slack and Telegram channels on fake APIs, the outbox in SQLite and
// a guarded tool (refund) that needs approval; the echo model answers.
type chanEnv struct {
	*env
	q     *chanQueue
	host  *runtime.Channels // set its Record before the first delivery
	store *registry.Channels
	slack *channelstest.Slack
	tg    *channelstest.Telegram
	tool  *guardedTool
}

func startChannels(t *testing.T, vars map[string]string) *chanEnv {
	t.Helper()
	return startChannelsOf(t, loadAgent(t, "hello"), vars)
}

func startChannelsOf(t *testing.T, ag *agent.Agent, vars map[string]string) *chanEnv {
	t.Helper()
	ag.Config.Channels = &agent.ChannelsConfig{
		Slack:    &agent.SlackChannel{SigningSecret: "env:SLACK_SIGNING_SECRET", BotToken: "env:SLACK_BOT_TOKEN"},
		Telegram: &agent.TelegramChannel{SecretToken: "env:TG_SECRET", BotToken: "env:TG_TOKEN"},
	}
	e := &chanEnv{q: &chanQueue{tasks: make(chan runtime.ChannelTask, 100)}, store: registry.NewChannels(dbtest.SQLite(t)),
		slack: channelstest.NewSlack(t), tg: channelstest.NewTelegram(t), tool: &guardedTool{name: "refund"}}
	if vars == nil {
		vars = map[string]string{"SLACK_SIGNING_SECRET": slackSecret, "SLACK_BOT_TOKEN": e.slack.Token, "TG_SECRET": tgSecret, "TG_TOKEN": e.tg.Token}
	}
	e.host = &runtime.Channels{Store: e.store, Turn: e.q.turn, Send: e.q.send, SlackAPI: e.slack.URL, TelegramAPI: e.tg.URL}
	e.env = start(t, runtime.Options{Agent: ag, AgentID: agentID, ExtraTools: []tools.Tool{e.tool},
		DefaultModel: agent.ModelRef{Provider: models.ProviderEcho, Model: "echo"},
		Env:          func(name string) (string, bool) { v, ok := vars[name]; return v, ok },
		Channels:     e.host,
	})
	return e
}

// deliver posts d to path and returns the status and the answer.
func (e *chanEnv) deliver(d channelstest.Delivery, path string) *response {
	e.t.Helper()
	req, err := d.NewRequest(context.Background(), e.url+path)
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out := &response{Status: resp.StatusCode}
	_ = json.NewDecoder(resp.Body).Decode(&out.JSON)
	return out
}

// drain runs the queued tasks, and those they enqueue, until none is left (a task's time is
// not waited for).
func (e *chanEnv) drain() {
	e.t.Helper()
	for {
		select {
		case task := <-e.q.tasks:
			if err := e.rt.RunChannel(context.Background(), task); err != nil {
				e.t.Fatalf("RunChannel(%+v): %v", task, err)
			}
		default:
			return
		}
	}
}

func (e *chanEnv) next() runtime.ChannelTask {
	e.t.Helper()
	return <-e.q.tasks
}

func withText(t *testing.T, fixture, from, to string) []byte {
	t.Helper()
	b := string(channelstest.Fixture(t, fixture))
	if !strings.Contains(b, from) {
		t.Fatalf("%s has no %q", fixture, from)
	}
	return []byte(strings.ReplaceAll(b, from, to))
}

// A mention is answered once in its thread, though Slack delivers it again (X-Slack-Retry-Num).
func TestChannelSlackMentionAnsweredOnceInThread(t *testing.T) {
	e := startChannels(t, nil)
	mention := channelstest.Fixture(t, "slack/app_mention.json")
	now := time.Now()
	if r := e.deliver(channelstest.SlackDelivery(slackSecret, mention, now), "/channels/slack/webhook"); r.Status != http.StatusOK {
		t.Fatalf("delivery: %d %v", r.Status, r.JSON)
	}
	if r := e.deliver(channelstest.SlackDelivery(slackSecret, mention, now, channelstest.WithRetryNum(1)), "/channels/slack/webhook"); r.Status != http.StatusOK || r.JSON["duplicate"] != true {
		t.Fatalf("retry: %d %v", r.Status, r.JSON)
	}
	e.drain()
	posts := e.slack.Acknowledged(slack.MethodPostMessage)
	if len(posts) != 1 {
		t.Fatalf("%d messages posted, want 1: %v", len(posts), posts)
	}
	var answer slack.PostMessage
	if err := json.Unmarshal(posts[0].Body, &answer); err != nil {
		t.Fatal(err)
	}
	if answer.Channel != "C0LAN2Q65" || answer.ThreadTS != "1515449522.000016" || answer.Text != "echo: is it everything a river should be?" {
		t.Errorf("answer %+v, want the echo in the mention's thread", answer)
	}
	// The session is the thread's, with the sender as metadata, in the channel's scope.
	sid := runtime.ChannelSessionID(agentID, "slack", "slack:T061EG9R6:C0LAN2Q65:1515449522.000016")
	r := e.do("GET", "/sessions/history/"+sid, "", nil)
	if r.Status != http.StatusOK || r.JSON["scope_id"] != "slack:T061EG9R6:C0LAN2Q65" || r.JSON["metadata"].(map[string]any)["channel_user"] != "U061F7AUR" {
		t.Errorf("session: %d %s", r.Status, r.Body)
	}
	// A re-run of the turn task sends nothing more.
	if err := e.rt.RunChannel(context.Background(), runtime.ChannelTask{Message: &channels.Message{Channel: "slack", DeliveryID: "Ev0LAN670R",
		ConversationKey: "slack:T061EG9R6:C0LAN2Q65:1515449522.000016", Text: "again", Addressed: true}}); err != nil {
		t.Fatal(err)
	}
	e.drain()
	if n := len(e.slack.Acknowledged("")); n != 1 || len(e.slack.Duplicates()) != 0 {
		t.Errorf("%d calls after a re-run, duplicates %v; want 1 and none", n, e.slack.Duplicates())
	}
}

// A bad signature, a stale timestamp and a wrong Telegram secret are 401 with nothing recorded.
func TestChannelRefusedDeliveries(t *testing.T) {
	e := startChannels(t, nil)
	mention := channelstest.Fixture(t, "slack/app_mention.json")
	update := channelstest.Fixture(t, "telegram/message.json")
	now := time.Now()
	for name, d := range map[string]struct {
		d    channelstest.Delivery
		path string
	}{
		"bad signature":   {channelstest.SlackDelivery("wrong", mention, now), "/channels/slack/webhook"},
		"stale timestamp": {channelstest.SlackDelivery(slackSecret, mention, now.Add(-10*time.Minute)), "/channels/slack/webhook"},
		"no signature":    {channelstest.SlackDelivery(slackSecret, mention, now, channelstest.WithHeader("X-Slack-Signature", "")), "/channels/slack/webhook"},
		"wrong secret":    {channelstest.TelegramDelivery("wrong", update), "/channels/telegram/webhook"},
		"bad press":       {channelstest.SlackInteractiveDelivery("wrong", channelstest.Fixture(t, "slack/block_actions.json"), now), "/channels/slack/interactive"},
	} {
		if r := e.deliver(d.d, d.path); r.Status != http.StatusUnauthorized || r.JSON["error"] != "unauthenticated" {
			t.Errorf("%s: %d %v, want 401 unauthenticated", name, r.Status, r.JSON)
		}
	}
	if len(e.q.tasks) != 0 || len(e.slack.Calls()) != 0 || len(e.tg.Calls()) != 0 {
		t.Fatalf("refused deliveries left %d tasks, %d calls", len(e.q.tasks), len(e.slack.Calls())+len(e.tg.Calls()))
	}
	for _, d := range [][2]string{{"slack", "Ev0LAN670R"}, {"telegram", "update:10000"}} {
		if dup, err := e.store.SeeDelivery(context.Background(), agentID, d[0], d[1]); err != nil || dup {
			t.Errorf("%s delivery %s was recorded (%v, %v)", d[0], d[1], dup, err)
		}
	}
	// Slack's url_verification is answered; a channel svc.json lacks is 404.
	challenge := channelstest.Fixture(t, "slack/url_verification.json")
	if r := e.deliver(channelstest.SlackDelivery(slackSecret, challenge, now), "/channels/slack/webhook"); r.Status != http.StatusOK || r.JSON["challenge"] == "" || r.JSON["challenge"] == nil {
		t.Errorf("url_verification: %d %v", r.Status, r.JSON)
	}
	if r := e.deliver(channelstest.WebhookDelivery("s", []byte(`{"id":"1","text":"hi"}`), now), "/channels/webhook/webhook"); r.Status != http.StatusNotFound ||
		!strings.Contains(str(r.JSON["message"]), `"webhook" is not configured`) {
		t.Errorf("unconfigured channel: %d %v", r.Status, r.JSON)
	}
}

// A channel whose secret is not set answers 503 naming the field and the variable.
func TestChannelUnsetSecret(t *testing.T) {
	e := startChannels(t, map[string]string{"SLACK_SIGNING_SECRET": slackSecret})
	r := e.deliver(channelstest.TelegramDelivery(tgSecret, channelstest.Fixture(t, "telegram/message.json")), "/channels/telegram/webhook")
	if msg := str(r.JSON["message"]); r.Status != http.StatusServiceUnavailable || r.JSON["error"] != "channel_unavailable" ||
		!strings.Contains(msg, "channels.telegram.secretToken") || !strings.Contains(msg, "TG_SECRET") || !strings.Contains(msg, "svc secrets set") {
		t.Errorf("unset secret: %d %v", r.Status, r.JSON)
	}
}

// A 5,000-character answer reaches Telegram as two messages, in order; a 429 is waited out.
func TestChannelTelegramLongAnswerSplit(t *testing.T) {
	e := startChannels(t, nil)
	long := strings.Repeat("word ", 999)[:4994]
	update := withText(t, "telegram/message.json", "What is the weather in Oslo?", long)
	if r := e.deliver(channelstest.TelegramDelivery(tgSecret, update), "/channels/telegram/webhook"); r.Status != http.StatusOK {
		t.Fatalf("delivery: %d %v", r.Status, r.JSON)
	}
	e.tg.FailNext(1, http.StatusTooManyRequests, 3*time.Second)
	e.drain()
	sent := e.tg.Acknowledged(telegram.MethodSendMessage)
	if len(sent) != 2 {
		t.Fatalf("%d messages sent, want 2", len(sent))
	}
	var got strings.Builder
	for _, c := range sent {
		var m telegram.SendMessage
		if err := json.Unmarshal(c.Body, &m); err != nil {
			t.Fatal(err)
		}
		if m.ChatID != 1111111 {
			t.Errorf("sent to chat %d", m.ChatID)
		}
		got.WriteString(m.Text)
	}
	if want := "echo: " + long; got.String() != want {
		t.Errorf("the parts make %d characters, want the %d of the answer", got.Len(), len(want))
	}
	if calls := e.tg.Calls(); len(calls) != 3 || calls[0].Status != http.StatusTooManyRequests || len(e.tg.Duplicates()) != 0 {
		t.Errorf("calls %d (first %d), duplicates %v; want the 429 then two messages", len(calls), calls[0].Status, e.tg.Duplicates())
	}
}

// An approval is posted as buttons while the turn waits; pressed twice, it is answered once and
// the second press is told so.
func TestChannelApprovalPressedTwice(t *testing.T) {
	e := startChannels(t, nil)
	mention := withText(t, "slack/app_mention.json", "is it everything a river should be?", "/tool refund {}")
	if r := e.deliver(channelstest.SlackDelivery(slackSecret, mention, time.Now()), "/channels/slack/webhook"); r.Status != http.StatusOK {
		t.Fatalf("delivery: %d %v", r.Status, r.JSON)
	}
	turnTask := e.next()
	done := make(chan error, 1)
	go func() { done <- e.rt.RunChannel(context.Background(), turnTask) }()
	if err := e.rt.RunChannel(context.Background(), e.next()); err != nil { // the prompt's sending
		t.Fatal(err)
	}
	posts := e.slack.Acknowledged(slack.MethodPostMessage)
	if len(posts) != 1 || !strings.Contains(string(posts[0].Body), "refund") {
		t.Fatalf("posts %v, want the approval prompt", posts)
	}
	var prompt struct {
		Blocks []struct {
			Elements []struct {
				Value string `json:"value"`
			} `json:"elements"`
		} `json:"blocks"`
	}
	if err := json.Unmarshal(posts[0].Body, &prompt); err != nil {
		t.Fatal(err)
	}
	var approve string
	for _, b := range prompt.Blocks {
		for _, el := range b.Elements {
			if strings.HasSuffix(el.Value, ":y") {
				approve = el.Value
			}
		}
	}
	cb, err := channels.DecodeCallback(approve)
	if err != nil {
		t.Fatalf("approve button %q: %v", approve, err)
	}
	press := strings.ReplaceAll(string(channelstest.Fixture(t, "slack/block_actions.json")), "apr_k3j5n7p9q2r4s6t8", cb.ID)
	for i, want := range []string{"answered", "already_answered"} {
		second := strings.Replace(press, `"trigger_id": "12466734323`, `"trigger_id": "2`+string(rune('0'+i)), 1)
		r := e.deliver(channelstest.SlackInteractiveDelivery(slackSecret, []byte(second), time.Now()), "/channels/slack/interactive")
		if r.Status != http.StatusOK || r.JSON["outcome"] != want {
			t.Fatalf("press %d: %d %v, want %s", i, r.Status, r.JSON, want)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("turn: %v", err)
	}
	e.drain()
	if n := e.tool.calls.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want once", n)
	}
	updates, notices := e.slack.Acknowledged(slack.MethodUpdate), e.slack.Acknowledged(slack.MethodPostEphemeral)
	if len(updates) != 1 || !strings.Contains(string(updates[0].Body), "Approved by") {
		t.Errorf("updates %v, want one showing the approval", updates)
	}
	if len(notices) != 1 || !strings.Contains(string(notices[0].Body), "already answered") {
		t.Errorf("notices %v, want one saying it was already answered", notices)
	}
	if dups := e.slack.Duplicates(); len(dups) != 0 {
		t.Errorf("duplicates %v", dups)
	}
}

// askPlans starts the channels of an agent with ask_user and delivers the message deliver makes
// of a text asking, through ask_user, "Which plan?" with the options free and pro labelled free
// and pro; it returns once the turn has run.
func askPlans(t *testing.T, free, pro string, deliver func(ask string) (channelstest.Delivery, string)) *chanEnv {
	t.Helper()
	ag, err := agent.LoadDir(agenttest.Write(t, map[string]string{
		"svc.json":                  `{"name": "desk", "version": "1"}`,
		"agents/default/AGENT.md":   "You are the front desk.",
		"agents/default/agent.json": `{"name": "default", "tools": ["ask_user"]}`,
	}))
	if err != nil {
		t.Fatal(err)
	}
	e := startChannelsOf(t, ag, nil)
	ask := fmt.Sprintf(`/tool ask_user {"question": "Which plan?", "options": [{"value": "free", "label": %q}, {"value": "pro", "label": %q}]}`, free, pro)
	d, path := deliver(strings.ReplaceAll(ask, `"`, `\"`))
	if r := e.deliver(d, path); r.Status != http.StatusOK {
		t.Fatalf("delivery: %d %v", r.Status, r.JSON)
	}
	e.drain()
	return e
}

// An ask_user question reaches Telegram as an inline keyboard; the option pressed is the next
// message of the chat, once: a second press is told it was answered.
func TestChannelChoicePressedTwice(t *testing.T) {
	e := askPlans(t, "Free", "Pro", func(ask string) (channelstest.Delivery, string) {
		update := withText(t, "telegram/message.json", "What is the weather in Oslo?", ask)
		return channelstest.TelegramDelivery(tgSecret, update), "/channels/telegram/webhook"
	})
	sent := e.tg.Acknowledged(telegram.MethodSendMessage)
	if len(sent) != 1 || !strings.Contains(string(sent[0].Body), "inline_keyboard") {
		t.Fatalf("sent %v, want the question with its keyboard", sent)
	}
	var q struct {
		ReplyMarkup struct {
			InlineKeyboard [][]struct {
				Text         string `json:"text"`
				CallbackData string `json:"callback_data"`
			} `json:"inline_keyboard"`
		} `json:"reply_markup"`
	}
	if err := json.Unmarshal(sent[0].Body, &q); err != nil || len(q.ReplyMarkup.InlineKeyboard) != 2 {
		t.Fatalf("keyboard %+v, %v", q, err)
	}
	cb, err := channels.DecodeCallback(q.ReplyMarkup.InlineKeyboard[1][0].CallbackData)
	if err != nil {
		t.Fatal(err)
	}
	press := strings.ReplaceAll(string(channelstest.Fixture(t, "telegram/callback_query.json")), "ask_m4n5b6v7c8x9z0l1", cb.ID)
	for i, want := range []string{"answered", "already_answered"} {
		p := strings.Replace(press, `"update_id": 10003`, `"update_id": 1000`+string(rune('4'+i)), 1)
		r := e.deliver(channelstest.TelegramDelivery(tgSecret, []byte(p)), "/channels/telegram/webhook")
		if r.Status != http.StatusOK || r.JSON["outcome"] != want {
			t.Fatalf("press %d: %d %v, want %s", i, r.Status, r.JSON, want)
		}
	}
	e.drain()
	var texts []string
	for _, c := range e.tg.Acknowledged(telegram.MethodSendMessage) {
		var m telegram.SendMessage
		_ = json.Unmarshal(c.Body, &m)
		texts = append(texts, m.Text)
	}
	if len(texts) != 2 || texts[1] != "echo: pro" {
		t.Errorf("messages %q, want the question, then the answer to the choice Pro: its value, pro", texts)
	}
	if n := len(e.tg.Acknowledged(telegram.MethodAnswerCallbackQuery)); n != 2 || len(e.tg.Duplicates()) != 0 {
		t.Errorf("%d callback answers, duplicates %v; want one per press", n, e.tg.Duplicates())
	}
}

// A thread reply without a mention continues the thread's session when the agent is in it, and
// is ignored otherwise.
func TestChannelSlackThreadReplyNeedsTheSession(t *testing.T) {
	e := startChannels(t, nil)
	now := time.Now()
	reply := channelstest.Fixture(t, "slack/message_thread.json")
	if r := e.deliver(channelstest.SlackDelivery(slackSecret, reply, now), "/channels/slack/webhook"); r.Status != http.StatusOK {
		t.Fatalf("reply before the mention: %d %v", r.Status, r.JSON)
	}
	e.drain()
	if n := len(e.slack.Calls()); n != 0 {
		t.Fatalf("%d calls for a thread the agent is not in, want none", n)
	}
	if r := e.deliver(channelstest.SlackDelivery(slackSecret, channelstest.Fixture(t, "slack/app_mention.json"), now), "/channels/slack/webhook"); r.Status != http.StatusOK {
		t.Fatalf("mention: %d %v", r.Status, r.JSON)
	}
	again := withText(t, "slack/message_thread.json", "Ev0LAN9X2Q", "Ev0LAN9X2R")
	if r := e.deliver(channelstest.SlackDelivery(slackSecret, again, now), "/channels/slack/webhook"); r.Status != http.StatusOK {
		t.Fatalf("reply after the mention: %d %v", r.Status, r.JSON)
	}
	e.drain()
	var texts []string
	for _, c := range e.slack.Acknowledged(slack.MethodPostMessage) {
		var m slack.PostMessage
		_ = json.Unmarshal(c.Body, &m)
		texts = append(texts, m.Text)
	}
	if len(texts) != 2 || texts[1] != "echo: and what about the delta?" {
		t.Errorf("answers %q, want the mention's, then the thread reply's", texts)
	}
}
