package slack

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/url"
	"strings"

	"svc/runner/channels"
)

// Parser reads verified Slack deliveries. Its zero value works; BotUserID only matters when a
// payload lacks the authorizations Slack normally includes.
type Parser struct {
	// BotUserID is the agent's bot user ("U0LAN0Z89"): its own messages are ignored and a
	// leading mention of it is cut from the text. When empty, the bot user of the payload's
	// authorizations is used.
	BotUserID string
}

// Parse reads a verified delivery with a zero Parser: see Parser.Parse.
func Parse(body []byte) (channels.Event, error) { return Parser{}.Parse(body) }

// Parse reads a verified delivery of either of the app's request URLs: an Events API body
// (JSON, /channels/slack/webhook) or an interactive payload (form-encoded payload=<json>,
// /channels/slack/interactive). It returns
//
//   - channels.Challenge for url_verification;
//   - *channels.Message for an app_mention, or a message event in a channel, group or direct
//     message, by a person, with text;
//   - *channels.Action for a block_actions press of one of the agent's buttons;
//   - channels.Ignored for the rest: bots' and the agent's own messages (bot_id, the bot user),
//     subtypes (message_changed, message_deleted, channel_join, bot_message...), other event
//     and payload types, a channel message event that mentions the agent (its app_mention
//     starts the turn), a message without text;
//
// and a *channels.PayloadError naming the field when the body cannot be read.
func (p Parser) Parse(body []byte) (channels.Event, error) {
	trimmed := bytes.TrimSpace(body)
	if bytes.HasPrefix(trimmed, []byte("payload=")) {
		form, err := url.ParseQuery(string(trimmed))
		if err != nil {
			return nil, payloadError("payload", "not a form: "+err.Error())
		}
		return p.parseInteractive([]byte(form.Get("payload")))
	}
	var env envelope
	if err := json.Unmarshal(trimmed, &env); err != nil {
		return nil, payloadError("body", "not JSON: "+err.Error())
	}
	switch env.Type {
	case "url_verification":
		if env.Challenge == "" {
			return nil, payloadError("challenge", "missing")
		}
		return channels.Challenge{Value: env.Challenge}, nil
	case "event_callback":
		return p.parseEvent(&env)
	}
	return channels.Ignored{Reason: "envelope type " + quoteOr(env.Type, "none")}, nil
}

// envelope is the Events API's outer object.
type envelope struct {
	Type           string `json:"type"`
	Challenge      string `json:"challenge"`
	TeamID         string `json:"team_id"`
	EventID        string `json:"event_id"`
	Authorizations []struct {
		UserID string `json:"user_id"`
		IsBot  bool   `json:"is_bot"`
	} `json:"authorizations"`
	Event *event `json:"event"`
}

// event is the inner event: the fields of app_mention and message that matter here.
type event struct {
	Type        string `json:"type"`
	Subtype     string `json:"subtype"`
	User        string `json:"user"`
	BotID       string `json:"bot_id"`
	Text        string `json:"text"`
	TS          string `json:"ts"`
	ThreadTS    string `json:"thread_ts"`
	Channel     string `json:"channel"`
	ChannelType string `json:"channel_type"`
	Team        string `json:"team"`
}

// personSubtype reports whether a message subtype is still a person writing: none, a thread reply
// also sent to the channel, a message with a file (its text is read).
func personSubtype(subtype string) bool {
	switch subtype {
	case "", "thread_broadcast", "file_share":
		return true
	}
	return false
}

func (p Parser) parseEvent(env *envelope) (channels.Event, error) {
	ev := env.Event
	switch {
	case env.EventID == "":
		return nil, payloadError("event_id", "missing")
	case ev == nil:
		return nil, payloadError("event", "missing")
	case ev.Type != "app_mention" && ev.Type != "message":
		return channels.Ignored{Reason: "event type " + quoteOr(ev.Type, "none")}, nil
	case !personSubtype(ev.Subtype):
		return channels.Ignored{Reason: "message subtype " + ev.Subtype}, nil
	case ev.BotID != "":
		return channels.Ignored{Reason: "a bot's message"}, nil
	case ev.User == "":
		return channels.Ignored{Reason: "a message without user"}, nil
	}
	bot := p.BotUserID
	for _, a := range env.Authorizations {
		if bot == "" && a.IsBot {
			bot = a.UserID
		}
	}
	if bot != "" && ev.User == bot {
		return channels.Ignored{Reason: "the agent's own message"}, nil
	}
	team := env.TeamID
	if team == "" {
		team = ev.Team
	}
	switch {
	case team == "":
		return nil, payloadError("team_id", "missing")
	case ev.Channel == "":
		return nil, payloadError("event.channel", "missing")
	case ev.TS == "":
		return nil, payloadError("event.ts", "missing")
	}
	direct := ev.ChannelType == "im"
	mention := bot != "" && strings.Contains(ev.Text, "<@"+bot+">")
	if ev.Type == "message" && !direct && mention {
		return channels.Ignored{Reason: "a mention of the agent: its app_mention event starts the turn"}, nil
	}
	text := strings.TrimSpace(ev.Text)
	if bot != "" {
		text = strings.TrimSpace(strings.TrimPrefix(text, "<@"+bot+">"))
	}
	if text == "" {
		return channels.Ignored{Reason: "a message without text"}, nil
	}
	thread := ev.ThreadTS
	if thread == "" {
		thread = ev.TS
	}
	return &channels.Message{
		Channel:         channels.Slack,
		DeliveryID:      env.EventID,
		ConversationKey: conversationKey(team, ev.Channel, thread),
		ScopeID:         scopeID(team, ev.Channel),
		User:            channels.User{ID: ev.User},
		Text:            text,
		Addressed:       ev.Type == "app_mention" || direct,
		Reply:           channels.Reply{Channel: channels.Slack, SlackChannel: ev.Channel, ThreadTS: thread, SlackUser: ev.User},
	}, nil
}

// interactive is a block_actions payload: the fields that matter here.
type interactive struct {
	Type      string `json:"type"`
	TriggerID string `json:"trigger_id"`
	User      struct {
		ID       string `json:"id"`
		Username string `json:"username"`
		Name     string `json:"name"`
		TeamID   string `json:"team_id"`
	} `json:"user"`
	Team *struct {
		ID string `json:"id"`
	} `json:"team"`
	Container struct {
		MessageTS string `json:"message_ts"`
		ChannelID string `json:"channel_id"`
		ThreadTS  string `json:"thread_ts"`
	} `json:"container"`
	Channel *struct {
		ID string `json:"id"`
	} `json:"channel"`
	Message *struct {
		Text     string  `json:"text"`
		TS       string  `json:"ts"`
		ThreadTS string  `json:"thread_ts"`
		Blocks   []block `json:"blocks"`
	} `json:"message"`
	Actions []struct {
		ActionID string     `json:"action_id"`
		Value    string     `json:"value"`
		Text     *textBlock `json:"text"`
		ActionTS string     `json:"action_ts"`
	} `json:"actions"`
}

func (p Parser) parseInteractive(data []byte) (channels.Event, error) {
	if len(data) == 0 {
		return nil, payloadError("payload", "missing")
	}
	var in interactive
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, payloadError("payload", "not JSON: "+err.Error())
	}
	if in.Type != "block_actions" {
		return channels.Ignored{Reason: "interactive type " + quoteOr(in.Type, "none")}, nil
	}
	if len(in.Actions) == 0 {
		return channels.Ignored{Reason: "block_actions without actions"}, nil
	}
	act := in.Actions[0]
	cb, err := channels.DecodeCallback(act.Value)
	if err != nil {
		return channels.Ignored{Reason: "not an svc button: " + err.Error()}, nil
	}
	team := in.User.TeamID
	if in.Team != nil && in.Team.ID != "" {
		team = in.Team.ID
	}
	channel := in.Container.ChannelID
	if channel == "" && in.Channel != nil {
		channel = in.Channel.ID
	}
	messageTS, thread, prompt := in.Container.MessageTS, in.Container.ThreadTS, ""
	if m := in.Message; m != nil {
		messageTS = cmp.Or(messageTS, m.TS)
		thread = cmp.Or(thread, m.ThreadTS)
		prompt = promptOf(m.Blocks, cb.ID, m.Text)
	}
	thread = cmp.Or(thread, messageTS)
	switch {
	case in.User.ID == "":
		return nil, payloadError("user.id", "missing")
	case team == "":
		return nil, payloadError("team.id", "missing")
	case channel == "":
		return nil, payloadError("container.channel_id", "missing")
	case messageTS == "":
		return nil, payloadError("container.message_ts", "missing")
	}
	delivery := "action:" + in.TriggerID
	if in.TriggerID == "" {
		delivery = "action:" + messageTS + ":" + act.ActionTS
	}
	label := ""
	if act.Text != nil {
		label = act.Text.Text
	}
	return &channels.Action{
		Channel:         channels.Slack,
		DeliveryID:      delivery,
		ConversationKey: conversationKey(team, channel, thread),
		ScopeID:         scopeID(team, channel),
		Callback:        cb,
		Label:           label,
		User:            channels.User{ID: in.User.ID, Name: cmp.Or(in.User.Username, in.User.Name)},
		Reply:           channels.Reply{Channel: channels.Slack, SlackChannel: channel, ThreadTS: thread, SlackUser: in.User.ID},
		Ack:             channels.Ack{MessageID: messageTS, PromptText: prompt},
	}, nil
}

// promptOf is the prompt's text: the section block Render gave the prompt's id, else the
// message's text.
func promptOf(blocks []block, id, fallback string) string {
	for _, b := range blocks {
		if b.Type == "section" && b.BlockID == blockID(id) && b.Text != nil {
			return b.Text.Text
		}
	}
	return fallback
}

func conversationKey(team, channel, thread string) string {
	return "slack:" + team + ":" + channel + ":" + thread
}

func scopeID(team, channel string) string { return "slack:" + team + ":" + channel }

func payloadError(field, reason string) error {
	return &channels.PayloadError{Channel: channels.Slack, Field: field, Reason: reason}
}

func quoteOr(s, none string) string {
	if s == "" {
		return none
	}
	return `"` + s + `"`
}
