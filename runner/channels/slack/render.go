package slack

import (
	"cmp"
	"errors"
	"fmt"
	"strings"

	"svc/runner/channels"
)

// Slack's documented limits (api.slack.com: chat.postMessage, Block Kit reference), as known when
// this was written:
//
//   - chat.postMessage text: keep it within 4,000 characters; Slack truncates text longer than
//     40,000 characters. Render sends at most MaxText per message.
//   - a section block's text: 3,000 characters (MaxSectionText); a message: 50 blocks.
//   - a button's text: 75 characters (MaxButtonText); its value: 2,000 characters (the callback
//     data is at most 64 bytes); action_id and block_id: 255 characters; an actions block: 25
//     elements (channels.MaxOptions).
//
// Lengths are counted in UTF-16 code units, never fewer than Slack's characters, and after
// escaping &, < and > (which Slack requires, and which keeps an answer from pinging
// <!channel> or a user).
const (
	MaxText        = 4000
	MaxSectionText = 3000
	MaxButtonText  = 75
)

// The methods Render and RenderAck call.
const (
	MethodPostMessage   = "chat.postMessage"
	MethodUpdate        = "chat.update"
	MethodPostEphemeral = "chat.postEphemeral"
)

// The action_ids of the agent's buttons.
const (
	ActionApprove = "svc_approve"
	ActionDeny    = "svc_deny"
	// ActionChoicePrefix is followed by the option's index.
	ActionChoicePrefix = "svc_choice_"
)

// PostMessage is the body of chat.postMessage.
type PostMessage struct {
	Channel  string  `json:"channel"`
	ThreadTS string  `json:"thread_ts,omitempty"`
	Text     string  `json:"text"`
	Blocks   []block `json:"blocks,omitempty"`
}

// Update is the body of chat.update. Blocks is always sent: an empty list removes the buttons.
type Update struct {
	Channel string  `json:"channel"`
	TS      string  `json:"ts"`
	Text    string  `json:"text"`
	Blocks  []block `json:"blocks"`
}

// Ephemeral is the body of chat.postEphemeral: a notice only User sees.
type Ephemeral struct {
	Channel  string `json:"channel"`
	User     string `json:"user"`
	ThreadTS string `json:"thread_ts,omitempty"`
	Text     string `json:"text"`
}

// block is a Block Kit block: section, actions or context.
type block struct {
	Type     string       `json:"type"`
	BlockID  string       `json:"block_id,omitempty"`
	Text     *textBlock   `json:"text,omitempty"`
	Elements []blockEntry `json:"elements,omitempty"`
}

// blockEntry is an element of an actions block (a button) or of a context block (text).
type blockEntry struct {
	Type     string `json:"type"`
	ActionID string `json:"action_id,omitempty"`
	Text     any    `json:"text,omitempty"` // *textBlock for a button, string for context mrkdwn
	Value    string `json:"value,omitempty"`
	Style    string `json:"style,omitempty"`
}

// textBlock is a text object: mrkdwn or plain_text.
type textBlock struct {
	Type  string `json:"type"`
	Text  string `json:"text"`
	Emoji bool   `json:"emoji,omitempty"`
}

// ErrReplyTarget is returned by Render for a Reply that is not Slack's or has no channel.
var ErrReplyTarget = errors.New("slack: reply target is not a Slack channel")

// Render turns the parts of a reply into chat.postMessage calls in reply's thread, in order:
// text split into messages of at most MaxText; a prompt's text, then a message whose section
// block holds its last MaxSectionText and whose actions block holds its buttons (Approve and
// Deny, or one per option) carrying the callback data. Blank text sends nothing. The Requests
// have no idempotency key: the outbox gives each one.
func Render(reply channels.Reply, parts []channels.Part) ([]channels.Request, error) {
	if reply.Channel != channels.Slack || reply.SlackChannel == "" {
		return nil, fmt.Errorf("%w: %+v", ErrReplyTarget, reply)
	}
	var out []channels.Request
	post := func(text string, blocks []block) error {
		req, err := channels.NewRequest(MethodPostMessage, PostMessage{Channel: reply.SlackChannel, ThreadTS: reply.ThreadTS, Text: text, Blocks: blocks})
		out = append(out, req)
		return err
	}
	for i, p := range parts {
		if err := p.Check(); err != nil {
			return nil, fmt.Errorf("render part %d: %w", i, err)
		}
		if p.Kind == channels.PartText {
			for _, c := range splitEscaped(p.Text, MaxText) {
				if err := post(c, nil); err != nil {
					return nil, err
				}
			}
			continue
		}
		// A prompt: its text up to the last MaxSectionText goes first as plain messages.
		chunks := splitEscaped(p.PromptText(), MaxSectionText)
		last := ""
		if len(chunks) > 0 {
			last, chunks = chunks[len(chunks)-1], chunks[:len(chunks)-1]
		}
		for _, c := range chunks {
			if err := post(c, nil); err != nil {
				return nil, err
			}
		}
		buttons, err := buttonsOf(p)
		if err != nil {
			return nil, fmt.Errorf("render part %d: %w", i, err)
		}
		blocks := []block{{Type: "actions", BlockID: blockID(p.ID) + ":buttons", Elements: buttons}}
		if last != "" {
			blocks = append([]block{{Type: "section", BlockID: blockID(p.ID), Text: &textBlock{Type: "mrkdwn", Text: last}}}, blocks...)
		}
		if err := post(cmp.Or(last, "Choose:"), blocks); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// buttonsOf is the buttons of a prompt.
func buttonsOf(p channels.Part) ([]blockEntry, error) {
	button := func(actionID, label, style string, c channels.Callback) (blockEntry, error) {
		value, err := c.Encode()
		return blockEntry{Type: "button", ActionID: actionID, Text: &textBlock{Type: "plain_text", Text: truncate(label, MaxButtonText), Emoji: true}, Value: value, Style: style}, err
	}
	if p.Kind == channels.PartApproval {
		approve, err := button(ActionApprove, "Approve", "primary", channels.Callback{Kind: channels.ActionApproval, ID: p.ID, Approved: true})
		if err != nil {
			return nil, err
		}
		deny, err := button(ActionDeny, "Deny", "danger", channels.Callback{Kind: channels.ActionApproval, ID: p.ID})
		return []blockEntry{approve, deny}, err
	}
	out := make([]blockEntry, 0, len(p.Options))
	for i, o := range p.Options {
		b, err := button(fmt.Sprint(ActionChoicePrefix, i), o.Title(), "", channels.Callback{Kind: channels.ActionChoice, ID: p.ID, Option: i})
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// RenderAck is the acknowledgement of a button press a, by outcome: answered, chat.update
// replaces the prompt's buttons by the verdict ("✅ Approved by @ann"); already answered, an
// ephemeral notice tells only the presser; expired, the buttons are removed and the presser told.
func RenderAck(a *channels.Action, outcome channels.AckOutcome) ([]channels.Request, error) {
	if a.Reply.Channel != channels.Slack || a.Reply.SlackChannel == "" || a.Ack.MessageID == "" {
		return nil, fmt.Errorf("%w: action %+v", ErrReplyTarget, a.Reply)
	}
	prompt := a.Ack.PromptText
	update := func(line string) (channels.Request, error) {
		blocks := []block{{Type: "context", Elements: []blockEntry{{Type: "mrkdwn", Text: line}}}}
		if prompt != "" {
			blocks = append([]block{{Type: "section", BlockID: blockID(a.ID), Text: &textBlock{Type: "mrkdwn", Text: truncate(prompt, MaxSectionText)}}}, blocks...)
		}
		return channels.NewRequest(MethodUpdate, Update{Channel: a.Reply.SlackChannel, TS: a.Ack.MessageID, Text: strings.TrimSpace(prompt + "\n" + line), Blocks: blocks})
	}
	ephemeral := func() (channels.Request, error) {
		return channels.NewRequest(MethodPostEphemeral, Ephemeral{Channel: a.Reply.SlackChannel, User: a.User.ID, ThreadTS: a.Reply.ThreadTS, Text: channels.AckNotice(outcome)})
	}
	var reqs []channels.Request
	var err error
	switch outcome {
	case channels.AckAnswered:
		var r channels.Request
		pressed := *a
		pressed.Label = escape(a.Label)
		r, err = update(pressed.Verdict("<@" + a.User.ID + ">"))
		reqs = append(reqs, r)
	case channels.AckAlreadyAnswered:
		var r channels.Request
		r, err = ephemeral()
		reqs = append(reqs, r)
	default:
		r1, err1 := update("_" + channels.AckNotice(outcome) + "_")
		r2, err2 := ephemeral()
		reqs, err = append(reqs, r1, r2), errors.Join(err1, err2)
	}
	if err != nil {
		return nil, err
	}
	return reqs, nil
}

// blockID is the block_id of a prompt's section.
func blockID(id string) string { return "svc:" + id }

// escape replaces the three characters Slack reads as markup in text and mrkdwn.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// splitEscaped splits text so that each chunk, once escaped, is within limit, and returns the
// escaped chunks. Blank chunks are dropped.
func splitEscaped(text string, limit int) []string {
	var out []string
	for _, c := range channels.Split(text, limit) {
		e := escape(c)
		if n, raw := channels.UTF16Len(e), channels.UTF16Len(c); n > limit && raw > 2 {
			// Escapes grew the chunk: split it again, proportionally shorter.
			out = append(out, splitEscaped(c, min(raw-1, max(2, limit*raw/n)))...)
			continue
		}
		if strings.TrimSpace(e) != "" {
			out = append(out, e)
		}
	}
	return out
}

// truncate cuts s to at most limit UTF-16 units, ending with "…" when cut.
func truncate(s string, limit int) string {
	if channels.UTF16Len(s) <= limit {
		return s
	}
	return channels.Split(s, limit-1)[0] + "…"
}
