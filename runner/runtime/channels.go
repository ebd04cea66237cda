package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"svc/agent"
	"svc/groupcommit"
	"svc/registry"
	"svc/runner/access"
	"svc/runner/approvals"
	"svc/runner/channels"
	"svc/runner/channels/slack"
	"svc/runner/channels/telegram"
	"svc/runner/channels/webhook"
	"svc/runner/sessions"
	"svc/runner/sse"
	"svc/runner/turn"
)

// MaxChannelBody bounds a channel delivery's body: Slack, Telegram and the webhook send far less.
const MaxChannelBody = 1 << 20

// DeliveryWindow is how long a channel delivery id is remembered: Slack's last retry comes
// within an hour, Telegram's within a day.
const DeliveryWindow = 24 * time.Hour

// QuestionWindow is how long the option values of a question asked with buttons are kept: a
// later press answers with the button's label.
const QuestionWindow = 30 * 24 * time.Hour

// ErrChannelDropped is wrapped by RunChannel's error for work that retrying cannot help (the
// channel left svc.json, a message the guardrails block): the queue should give it up.
var ErrChannelDropped = errors.New("runtime: channel work dropped")

// Channels is what the messaging channel routes need of the platform: the store of deliveries
// and outbox, and the queue their turns and sends run through. cmd/svc wires registry's store
// and the platform queue; share one among the runtimes of a process. A runtime without it
// (svc dev) answers the channel routes 404 with the reason.
type Channels struct {
	Store *registry.Channels
	// Turn enqueues the turn of an accepted message of agentID (RunChannel runs it).
	Turn func(ctx context.Context, agentID string, m *channels.Message) error
	// Send enqueues the sending of outbox entries of agentID (RunChannel sends them).
	Send func(ctx context.Context, agentID string, s ChannelSend) error
	// SlackAPI and TelegramAPI are the platforms' API roots (SVC_SLACK_API_URL,
	// SVC_TELEGRAM_API_URL); "" means the public APIs.
	SlackAPI    string
	TelegramAPI string
	// HTTP makes the calls to the platforms; nil means each client's default.
	HTTP *http.Client
	// Record, when set, records a batch of accepted deliveries in one commit and says, for
	// each, whether it was a duplicate, or new with its turn enqueued in that commit or left to
	// Turn. Concurrent deliveries are batched (group commit). nil means Store.SeeDeliveries,
	// the turns enqueued by Turn.
	Record func(ctx context.Context, ds []Delivery) ([]Recorded, error)

	batchOnce sync.Once
	batch     *groupcommit.Group[Delivery, Recorded]
	// The deliveries being acknowledged by the runtimes of this host, and a channel closed when
	// their number falls to 0 (made anew when it rises from 0).
	ackMu   sync.Mutex
	acks    int
	acked   chan struct{}
	lastAck time.Time // when acks last fell to 0
}

// ackStart counts a delivery being acknowledged; ackEnd, deferred, counts it done.
func (h *Channels) ackStart() {
	h.ackMu.Lock()
	if h.acks == 0 {
		h.acked = make(chan struct{})
	}
	h.acks++
	h.ackMu.Unlock()
}

func (h *Channels) ackEnd() {
	h.ackMu.Lock()
	if h.acks--; h.acks == 0 {
		h.lastAck = time.Now()
		close(h.acked)
	}
	h.ackMu.Unlock()
}

// ackQuiet is how long after the last acknowledgement a burst is taken to have ended: the
// deliveries of a burst do not all overlap, and a turn started between two of them would share
// the CPU with the rest.
const ackQuiet = 5 * time.Millisecond

// AfterAcks returns once no delivery has been acknowledged by the runtimes of this host for
// ackQuiet (none in flight, nor one just answered), after at most max, or when ctx ends: a
// channel turn that runs in the process that takes deliveries calls it first, so that a burst
// of deliveries is answered before their turns take the CPU. With no delivery in flight or
// just answered it returns at once. A waiting turn is woken when the last acknowledgement
// leaves and when the quiet is over (it polled every millisecond before: 200 waiting turns
// were 200,000 timer wake-ups a second in the middle of a burst).
func (h *Channels) AfterAcks(ctx context.Context, max time.Duration) {
	deadline := time.NewTimer(max)
	defer deadline.Stop()
	var quiet *time.Timer
	defer func() {
		if quiet != nil {
			quiet.Stop()
		}
	}()
	for {
		h.ackMu.Lock()
		n, acked, last := h.acks, h.acked, h.lastAck
		h.ackMu.Unlock()
		var over <-chan time.Time
		if n == 0 {
			left := time.Until(last.Add(ackQuiet))
			if left <= 0 {
				return
			}
			if quiet == nil {
				quiet = time.NewTimer(left)
			} else {
				quiet.Reset(left)
			}
			over, acked = quiet.C, nil
		}
		select {
		case <-acked:
		case <-over:
		case <-ctx.Done():
			return
		case <-deadline.C:
			return
		}
	}
}

// ChannelSend is a batch of outbox entries of one channel to send in order, not before At.
type ChannelSend struct {
	Channel string    `json:"channel"`
	Outbox  []string  `json:"outbox"`
	At      time.Time `json:"at"`
}

// ChannelTask is the background work of a channel that RunChannel does: the turn of Message,
// or the sending of Send.
type ChannelTask struct {
	Message *channels.Message
	Send    *ChannelSend
}

// RunChannel does a channel's background work on this runtime (docs/channels.md):
//
//   - a Message is a turn on the conversation's session (ChannelSessionID), as a trusted
//     service caller in the message's scope, with the sender as metadata channel_user; its
//     approvals are sent as buttons while the turn waits, and its answer (text, questions) is
//     stored in the outbox and its sending enqueued. A message that is not addressed continues
//     only an existing session. A session busy with another turn is an error: the queue retries.
//     A message whose answer is in the outbox already (a re-run) enqueues its sending again and
//     runs no second turn.
//   - a Send sends the outbox entries in order, each claimed first (an entry another sender
//     claimed ends the task, that sender sends the rest): a sent or failed entry is skipped; a 429 waits
//     its Retry-After and another retryable failure backs off, by enqueueing the rest again; a
//     permanent failure marks the entry failed with the platform's error.
func (rt *Runtime) RunChannel(ctx context.Context, task ChannelTask) error {
	c := rt.channels
	if c.host == nil {
		return fmt.Errorf("%w: this runtime has no channels", ErrChannelDropped)
	}
	switch {
	case task.Message != nil:
		return c.turn(ctx, task.Message)
	case task.Send != nil:
		return c.send(ctx, *task.Send)
	}
	return fmt.Errorf("%w: a task with neither message nor send", ErrChannelDropped)
}

// ChannelSessionID is the session of a conversation of an agent's channel: the same for every
// message of a thread, on every runner.
func ChannelSessionID(agentID, channel, conversationKey string) string {
	sum := sha256.Sum256([]byte(agentID + "\x00" + channel + "\x00" + conversationKey))
	return "ses_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:16]))
}

// platformOf is what a channel's package does: verify, parse, render.
type platformOf struct {
	verify    func(h http.Header, body []byte, secret string, now time.Time) error
	parse     func(body []byte) (channels.Event, error)
	render    func(reply channels.Reply, parts []channels.Part) ([]channels.Request, error)
	renderAck func(a *channels.Action, outcome channels.AckOutcome) ([]channels.Request, error)
}

// platformFor returns the functions of channel, false for a name that is no channel.
func platformFor(channel string) (platformOf, bool) {
	switch channel {
	case agent.ChannelSlack:
		return platformOf{slack.Verify, slack.Parse, slack.Render, slack.RenderAck}, true
	case agent.ChannelTelegram:
		return platformOf{telegram.Verify, telegram.Parse, telegram.Render, telegram.RenderAck}, true
	case agent.ChannelWebhook:
		return platformOf{webhook.Verify, webhook.Parse, webhook.Render, webhook.RenderAck}, true
	}
	return platformOf{}, false
}

// sender posts one Request to a platform.
type sender interface {
	Send(ctx context.Context, req channels.Request) (channels.SendResult, error)
}

// channelRoutes serve /channels/{channel}/webhook and /channels/slack/interactive, and do the
// channels' background work (RunChannel).
type channelRoutes struct {
	host    *Channels // nil: not served
	cfg     *agent.ChannelsConfig
	agentID string
	env     func(string) (string, bool)
	hint    func(string) string
	hub     *approvals.Hub
	turns   *turn.Engine
	store   sessions.Store
	now     func() time.Time
	log     *slog.Logger
	// accepted counts deliveries, to prune old ones now and then; pruning is true while a
	// prune runs.
	accepted atomic.Int64
	pruning  atomic.Bool
	// resolved holds each channel's settings as last read (resolvedSettings).
	resolved sync.Map
}

// errNoChannels answers the routes of a runtime without the platform's channels.
var errNoChannels = &APIError{Code: CodeNotFound, Message: "messaging channels run on the platform (svc up, or svc api with workers and runners); svc dev does not serve them"}

// settings resolves the env: references of channel: its entry and their values, in the order
// of the entry's settings. A channel svc.json does not configure is 404; an unset variable 503.
// Values read within ChannelSettingsTTL are used again without reading them: each is a read of
// the agent's secrets, for every delivery, turn and send.
func (c *channelRoutes) settings(channel string) (agent.ChannelEntry, []string, error) {
	entry, values, _, err := c.settingsOf(channel, false)
	return entry, values, err
}

// settingsOf is settings, reading the values again when reread; cached says the values were
// read before.
func (c *channelRoutes) settingsOf(channel string, reread bool) (_ agent.ChannelEntry, _ []string, cached bool, _ error) {
	entry, ok := c.cfg.Channel(channel)
	if _, known := platformFor(channel); !ok || !known {
		return entry, nil, false, &APIError{Code: CodeNotFound, Message: "channel " + strconv.Quote(channel) + " is not configured in svc.json channels"}
	}
	if v, ok := c.resolved.Load(channel); ok && !reread {
		if r := v.(resolvedSettings); time.Since(r.at) < ChannelSettingsTTL {
			return entry, r.values, true, nil
		}
	}
	values := make([]string, len(entry.Settings))
	for i, s := range entry.Settings {
		name, _ := agent.ParseEnvRef(s.Value) // checked when the agent loaded
		v, set := "", false
		if c.env != nil {
			v, set = c.env(name)
		}
		if !set || v == "" {
			hint := "set it as an agent secret (svc secrets set) or in the runner's environment"
			if c.hint != nil {
				hint = c.hint(name)
			}
			return entry, nil, false, &APIError{Code: CodeChannelDown, Message: fmt.Sprintf("%s: variable %s is not set; %s", s.Field, name, hint)}
		}
		values[i] = v
	}
	c.resolved.Store(channel, resolvedSettings{values: values, at: time.Now()})
	return entry, values, false, nil
}

// ChannelSettingsTTL is how long a channel's secrets, once read, are used without reading them
// again: a changed bot token or signing secret is used within this long (a delivery signed
// with a new signing secret is verified against it at once: a failed verification reads the
// secret again).
const ChannelSettingsTTL = 2 * time.Second

// resolvedSettings are the values of a channel's settings read at at.
type resolvedSettings struct {
	values []string
	at     time.Time
}

// webhook serves POST /channels/{channel}/webhook: Slack's Events API, Telegram's updates, the
// signed webhook.
func (c *channelRoutes) webhook(w http.ResponseWriter, r *http.Request) error {
	return c.intake(w, r, r.PathValue("channel"))
}

// interactive serves POST /channels/slack/interactive: Slack's button presses.
func (c *channelRoutes) interactive(w http.ResponseWriter, r *http.Request) error {
	return c.intake(w, r, agent.ChannelSlack)
}

// intake verifies a delivery before anything else (401, nothing recorded), parses it and answers
// at once: a challenge, an ignored delivery, a duplicate, a message whose turn is enqueued, a
// button press answered (its acknowledgement through the outbox).
func (c *channelRoutes) intake(w http.ResponseWriter, r *http.Request, channel string) error {
	// 1. The channel, its secrets, the body.
	if c.host == nil {
		return errNoChannels
	}
	c.host.ackStart()
	defer c.host.ackEnd()
	_, values, cached, err := c.settingsOf(channel, false)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxChannelBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return &APIError{Code: CodeTooLarge, Message: fmt.Sprintf("a channel delivery is at most %d bytes", MaxChannelBody)}
		}
		return invalid("body", "cannot read the request body: %v", err)
	}
	// 2. Verify, then parse.
	p, _ := platformFor(channel) // settings knows it
	err = p.verify(r.Header, body, values[0], c.now())
	if err != nil && cached { // the secret may have changed since it was read
		if _, values, _, err = c.settingsOf(channel, true); err != nil {
			return err
		}
		err = p.verify(r.Header, body, values[0], c.now())
	}
	if err != nil {
		return &APIError{Code: CodeUnauthenticated, Message: strings.TrimPrefix(err.Error(), "channels: ")}
	}
	ev, err := p.parse(body)
	if pe, ok := errors.AsType[*channels.PayloadError](err); ok {
		return invalid(pe.Field, "%s", pe.Reason)
	}
	if err != nil {
		return err
	}
	// 3. Answer.
	switch ev := ev.(type) {
	case channels.Challenge:
		writeJSON(w, http.StatusOK, map[string]string{"challenge": ev.Value})
		return nil
	case channels.Ignored:
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "ignored": ev.Reason})
		return nil
	case *channels.Message:
		return c.accept(w, r, ev)
	case *channels.Action:
		return c.press(w, r, ev)
	}
	return fmt.Errorf("channel %s: unexpected event %T", channel, ev)
}

// seen records a delivery (a button press); true for a duplicate.
func (c *channelRoutes) seen(ctx context.Context, channel, id string) (bool, error) {
	c.pruneNowAndThen(ctx)
	return c.host.Store.SeeDelivery(ctx, c.agentID, channel, id)
}

// pruneNowAndThen forgets the deliveries older than DeliveryWindow, and the questions older than
// QuestionWindow, every 500 deliveries, in the background (one prune at a time): no delivery
// waits for it.
func (c *channelRoutes) pruneNowAndThen(ctx context.Context) {
	if c.accepted.Add(1)%500 != 0 || !c.pruning.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer c.pruning.Store(false)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if _, err := c.host.Store.PruneDeliveries(ctx, c.now().Add(-DeliveryWindow)); err != nil {
			c.log.Warn("channels: prune deliveries", "err", err)
		}
		if _, err := c.host.Store.PruneQuestions(ctx, c.now().Add(-QuestionWindow)); err != nil {
			c.log.Warn("channels: prune questions", "err", err)
		}
	}()
}

// forget removes a recorded delivery whose work could not be queued, so that the platform's
// retry is taken; a failure is logged (the retry is then refused as a duplicate).
func (c *channelRoutes) forget(ctx context.Context, channel, id string) {
	if err := c.host.Store.ForgetDelivery(context.WithoutCancel(ctx), c.agentID, channel, id); err != nil {
		c.log.ErrorContext(ctx, "channels: forget a delivery", "channel", channel, "delivery_id", id, "err", err)
	}
}

// accept dedupes a message and enqueues its turn, in one commit with the concurrent deliveries
// (Channels.Record). When its turn cannot be enqueued the delivery is forgotten, so that the
// platform's retry is taken, and the answer is 503.
func (c *channelRoutes) accept(w http.ResponseWriter, r *http.Request, m *channels.Message) error {
	c.pruneNowAndThen(r.Context())
	rec, err := c.host.record(Delivery{AgentID: c.agentID, Message: m})
	if err != nil {
		c.log.ErrorContext(r.Context(), "channels: record a delivery", "channel", m.Channel, "delivery_id", m.DeliveryID, "err", err)
		return &APIError{Code: CodeBusy, Message: "the message could not be queued; retry"}
	}
	switch rec {
	case RecordedDuplicate:
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "duplicate": true})
		return nil
	case RecordedNew:
		if err := c.host.Turn(r.Context(), c.agentID, m); err != nil {
			c.log.ErrorContext(r.Context(), "channels: enqueue a turn", "channel", m.Channel, "delivery_id", m.DeliveryID, "err", err)
			c.forget(r.Context(), string(m.Channel), m.DeliveryID)
			return &APIError{Code: CodeBusy, Message: "the message could not be queued; retry"}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	return nil
}

// press answers a button: an approval through the approvals hub, a question by a turn whose
// message is the option chosen; each once (a second press is told it was answered already).
// The acknowledgement goes through the outbox.
func (c *channelRoutes) press(w http.ResponseWriter, r *http.Request, a *channels.Action) error {
	ctx := r.Context()
	channel := string(a.Channel)
	if dup, err := c.seen(ctx, channel, a.DeliveryID); err != nil || dup {
		if err == nil {
			writeJSON(w, http.StatusOK, map[string]any{"ok": true, "duplicate": true})
		}
		return err
	}
	outcome, err := c.answer(ctx, a)
	if err != nil {
		return err
	}
	p, _ := platformFor(channel) // intake knows it
	reqs, err := p.renderAck(a, outcome)
	if err != nil {
		return err
	}
	if err := c.post(ctx, channel, c.key(channel, a.DeliveryID, "ack"), reqs); err != nil {
		// The platform's retry of the press is taken, and acknowledged (already answered).
		c.forget(ctx, channel, a.DeliveryID)
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "outcome": outcome})
	return nil
}

// answer gives a's answer to what waits for it.
func (c *channelRoutes) answer(ctx context.Context, a *channels.Action) (channels.AckOutcome, error) {
	channel := string(a.Channel)
	if a.Kind == channels.ActionApproval {
		status := approvals.Denied
		if a.Approved {
			status = approvals.Approved
		}
		_, err := c.hub.Decide(ctx, c.agentID, ChannelSessionID(c.agentID, channel, a.ConversationKey), a.ID, status)
		switch {
		case errors.Is(err, approvals.ErrNotFound):
			return channels.AckExpired, nil
		case errors.Is(err, approvals.ErrDecided):
			return channels.AckAlreadyAnswered, nil
		case err != nil:
			return "", err
		}
		return channels.AckAnswered, nil
	}
	// A question is answered by the next message: the option chosen, once per question.
	dup, err := c.host.Store.SeeDelivery(ctx, c.agentID, channel, "answer:"+a.ID)
	if err != nil || dup {
		return channels.AckAlreadyAnswered, err
	}
	// The option's value, as ask_user's caller reads the answer (the label when the question
	// was pruned, or asked before values were kept).
	text := a.Label
	values, err := c.host.Store.Question(ctx, c.agentID, a.ID)
	switch {
	case err == nil && a.Option < len(values):
		text = values[a.Option]
	case err != nil && !errors.Is(err, registry.ErrQuestionNotFound):
		c.forget(ctx, channel, "answer:"+a.ID)
		return "", err
	}
	if text == "" {
		text = fmt.Sprintf("option %d", a.Option+1)
	}
	m := &channels.Message{Channel: a.Channel, DeliveryID: a.DeliveryID, ConversationKey: a.ConversationKey, ScopeID: a.ScopeID,
		User: a.User, Text: text, Addressed: true, Reply: a.Reply}
	if err := c.host.Turn(ctx, c.agentID, m); err != nil {
		c.forget(ctx, channel, "answer:"+a.ID)
		return "", err
	}
	return channels.AckAnswered, nil
}

// key is the idempotency key prefix of what a delivery makes: the outbox entries of kind
// ("text", "ack", "apr:<id>") get "<prefix><index>".
func (c *channelRoutes) key(channel, deliveryID, kind string) string {
	return c.agentID + ":" + channel + ":" + deliveryID + ":" + kind + ":"
}

// post stores reqs in the outbox under keys prefix000, prefix001... and enqueues their sending.
func (c *channelRoutes) post(ctx context.Context, channel, prefix string, reqs []channels.Request) error {
	if len(reqs) == 0 {
		return nil
	}
	entries := make([]registry.OutboxEntry, len(reqs))
	for i, req := range reqs {
		req.IdempotencyKey = fmt.Sprintf("%s%03d", prefix, i)
		b, err := json.Marshal(req)
		if err != nil {
			return fmt.Errorf("channels: encode a request: %w", err)
		}
		entries[i] = registry.OutboxEntry{AgentID: c.agentID, Channel: channel, IdempotencyKey: req.IdempotencyKey, Request: b}
	}
	stored, err := c.host.Store.AddOutbox(ctx, entries)
	if err != nil {
		return err
	}
	return c.enqueueSend(ctx, channel, stored)
}

// enqueueSend enqueues the sending of the pending entries of stored.
func (c *channelRoutes) enqueueSend(ctx context.Context, channel string, stored []registry.OutboxEntry) error {
	var ids []string
	for _, e := range stored {
		if e.Status == registry.OutboxPending {
			ids = append(ids, e.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return c.host.Send(ctx, c.agentID, ChannelSend{Channel: channel, Outbox: ids, At: c.now()})
}

// turn runs the turn of message m (RunChannel).
func (c *channelRoutes) turn(ctx context.Context, m *channels.Message) error {
	channel := string(m.Channel)
	entry, _, err := c.settings(channel)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrChannelDropped, err)
	}
	// A re-run of a turn that ended: its answer is in the outbox.
	prefix := c.key(channel, m.DeliveryID, "text")
	done, err := c.host.Store.OutboxWithPrefix(ctx, prefix)
	if err != nil {
		return err
	}
	if len(done) > 0 {
		return c.enqueueSend(ctx, channel, done)
	}
	sid := ChannelSessionID(c.agentID, channel, m.ConversationKey)
	if !m.Addressed {
		if _, err := c.store.Load(ctx, sid); errors.Is(err, sessions.ErrNotFound) {
			return nil // a thread the agent is not part of
		} else if err != nil {
			return err
		}
	}
	meta := map[string]string{"channel_user": m.User.ID}
	if m.User.Name != "" {
		meta["channel_user_name"] = m.User.Name
	}
	t, err := c.turns.Open(ctx, turn.Start{
		SessionID: sid, New: turn.Settings{ScopeID: m.ScopeID, Agent: entry.Agent}, Text: m.Text, Metadata: meta,
		Caller: access.Identity{Scope: m.ScopeID, Method: access.MethodChannel},
	})
	if _, blocked := errors.AsType[*turn.BlockedError](err); blocked {
		return fmt.Errorf("%w: %v", ErrChannelDropped, err)
	}
	if err != nil {
		return err // a busy session among them: the queue retries
	}
	p, _ := platformFor(channel) // settings knows it
	// An approval is sent at once: the turn waits for its answer.
	sink := &channelSink{prompt: func(part channels.Part) error {
		reqs, err := p.render(m.Reply, []channels.Part{part})
		if err == nil {
			err = c.post(ctx, channel, c.key(channel, m.DeliveryID, "apr:"+part.ID), reqs)
		}
		return err
	}}
	t.Run(ctx, sink)
	parts := sink.parts
	if text := strings.TrimSpace(sink.text.String()); text != "" {
		parts = append([]channels.Part{channels.TextPart(text)}, parts...)
	} else if len(parts) == 0 && sink.lastError != "" {
		parts = []channels.Part{channels.TextPart("⚠️ " + sink.lastError)}
	}
	reqs, err := p.render(m.Reply, parts)
	if err != nil {
		return fmt.Errorf("%w: render the answer: %v", ErrChannelDropped, err)
	}
	// A question's buttons carry the index of an option: its value is kept for the press.
	for _, part := range parts {
		if part.Kind != channels.PartChoice {
			continue
		}
		values := make([]string, len(part.Options))
		for i, o := range part.Options {
			values[i] = o.Value
		}
		if err := c.host.Store.AddQuestion(ctx, c.agentID, part.ID, values); err != nil {
			return err
		}
	}
	if err := c.post(ctx, channel, prefix, reqs); err != nil {
		return err
	}
	return sink.err // a prompt that could not be stored: the re-run sends the answer stored above
}

// channelSink collects a channel turn's answer, and sends its approvals as they come.
type channelSink struct {
	prompt    func(channels.Part) error
	text      strings.Builder
	parts     []channels.Part
	lastError string
	err       error // a prompt that could not be stored
}

// Emit implements loop.Sink.
func (s *channelSink) Emit(f *sse.Frame) error {
	switch f.Type {
	case sse.TypeTextDelta:
		s.text.WriteString(f.Content)
	case sse.TypeError:
		s.lastError = f.Message
	case sse.TypeAskChoice:
		var opts []channels.Option
		if err := json.Unmarshal(f.Options, &opts); err == nil && len(opts) > 0 {
			s.parts = append(s.parts, channels.ChoicePart(f.AskID, f.Question, opts, f.Multi))
		}
	case sse.TypeConfirmationRequired:
		if err := s.prompt(channels.ApprovalPart(f.CorrelationID, approvalText(f))); err != nil && s.err == nil {
			s.err = fmt.Errorf("channels: send the approval prompt: %w", err)
		}
	}
	return nil
}

// approvalText is the prompt of a confirmation_required frame.
func approvalText(f *sse.Frame) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Approve the call of %s?", f.ToolName)
	if f.Method != "" || f.Endpoint != "" {
		fmt.Fprintf(&b, "\n%s %s", f.Method, f.Endpoint)
	}
	if f.ApprovalReason != "" {
		b.WriteString("\n" + f.ApprovalReason)
	}
	return b.String()
}

// send sends a batch of outbox entries in order (RunChannel).
func (c *channelRoutes) send(ctx context.Context, s ChannelSend) error {
	_, values, err := c.settings(s.Channel)
	if err != nil {
		return err // a secret unset meanwhile: retried
	}
	client := c.client(s.Channel, values)
	for i, id := range s.Outbox {
		e, err := c.host.Store.Outbox(ctx, id)
		if errors.Is(err, registry.ErrOutboxNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if e.Status == registry.OutboxSending {
			return nil // another sender has it, and the rest after it
		}
		if e.Status != registry.OutboxPending {
			continue
		}
		// Claimed, so that a second task of the same entries (the sweep's) cannot send it too.
		if ok, err := c.host.Store.ClaimOutbox(ctx, id, c.now().Add(ChannelSendClaim)); err != nil || !ok {
			return err
		}
		var req channels.Request
		if err := json.Unmarshal(e.Request, &req); err != nil {
			if err := c.host.Store.MarkFailed(ctx, id, "stored request: "+err.Error()); err != nil {
				return err
			}
			continue
		}
		_, err = client.Send(ctx, req)
		if err == nil {
			if err := c.host.Store.MarkSent(ctx, id); err != nil {
				return err
			}
			continue
		}
		se, ok := errors.AsType[*channels.SendError](err)
		if ok && !se.Retryable {
			c.log.WarnContext(ctx, "channels: a reply was refused", "channel", s.Channel, "outbox_id", id, "err", err)
			if err := c.host.Store.MarkFailed(ctx, id, err.Error()); err != nil {
				return err
			}
			continue
		}
		// Retryable: wait what the platform asks, else back off; the rest waits too, in order.
		delay := min(time.Second<<min(e.Attempts, 16), 5*time.Minute)
		if ok && se.RetryAfter > 0 {
			delay = se.RetryAfter
		}
		at := c.now().Add(delay)
		if err := c.host.Store.Postpone(ctx, id, at, err.Error()); err != nil {
			return err
		}
		return c.host.Send(ctx, c.agentID, ChannelSend{Channel: s.Channel, Outbox: s.Outbox[i:], At: at})
	}
	return nil
}

// ChannelSendClaim is how long a sender holds an outbox entry it sends (the send task's
// timeout is 5 minutes): one whose sender died is sent by the sweep after it.
const ChannelSendClaim = 10 * time.Minute

// client is the sender of channel with its resolved settings.
func (c *channelRoutes) client(channel string, values []string) sender {
	switch channel {
	case agent.ChannelSlack:
		return &slack.Client{BaseURL: c.host.SlackAPI, Token: values[1], HTTP: c.host.HTTP}
	case agent.ChannelTelegram:
		return &telegram.Client{BaseURL: c.host.TelegramAPI, Token: values[1], HTTP: c.host.HTTP}
	}
	return &webhook.Client{URL: values[1], Secret: values[0], HTTP: c.host.HTTP, Now: c.now}
}
