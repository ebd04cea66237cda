package telegram

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"svc/runner/channels"
)

// MaxText is Telegram's limit on a message's text: 4,096 characters, counted in UTF-16 code units
// (an emoji outside the Basic Multilingual Plane counts 2), after entity parsing; Render sends
// plain text (no parse_mode), so the count is of the text as sent.
const MaxText = 4096

// The methods Render and RenderAck call.
const (
	MethodSendMessage            = "sendMessage"
	MethodAnswerCallbackQuery    = "answerCallbackQuery"
	MethodEditMessageText        = "editMessageText"
	MethodEditMessageReplyMarkup = "editMessageReplyMarkup"
)

// SendMessage is the body of sendMessage.
type SendMessage struct {
	ChatID          int64            `json:"chat_id"`
	MessageThreadID int64            `json:"message_thread_id,omitempty"`
	Text            string           `json:"text"`
	ReplyParameters *ReplyParameters `json:"reply_parameters,omitempty"`
	ReplyMarkup     *replyMarkup     `json:"reply_markup,omitempty"`
}

// ReplyParameters makes a message a reply to MessageID (Bot API 7.0); the reply is sent even if
// that message was deleted meanwhile.
type ReplyParameters struct {
	MessageID                int64 `json:"message_id"`
	AllowSendingWithoutReply bool  `json:"allow_sending_without_reply"`
}

// AnswerCallbackQuery is the body of answerCallbackQuery: it stops the button's spinner and shows
// Text briefly.
type AnswerCallbackQuery struct {
	CallbackQueryID string `json:"callback_query_id"`
	Text            string `json:"text,omitempty"`
}

// EditMessage is the body of editMessageText and editMessageReplyMarkup. editMessageText without
// reply_markup removes the keyboard; editMessageReplyMarkup with an empty keyboard does too.
type EditMessage struct {
	ChatID      int64        `json:"chat_id"`
	MessageID   int64        `json:"message_id"`
	Text        string       `json:"text,omitempty"`
	ReplyMarkup *replyMarkup `json:"reply_markup,omitempty"`
}

// replyMarkup is an InlineKeyboardMarkup.
type replyMarkup struct {
	InlineKeyboard [][]button `json:"inline_keyboard"`
}

// button is an InlineKeyboardButton with callback data.
type button struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data"`
}

// ErrReplyTarget is returned by Render for a Reply that is not Telegram's or has no chat.
var ErrReplyTarget = errors.New("telegram: reply target is not a Telegram chat")

// Render turns the parts of a reply into sendMessage calls in reply's chat and topic, in order:
// text split into messages of at most MaxText UTF-16 code units (on paragraph, line or word
// boundaries, never inside a character); a prompt's text with an inline keyboard under its last
// message (Approve and Deny in one row, one option per row) carrying the callback data. The
// first message replies to the message answered. Blank text sends nothing. The Requests have no
// idempotency key: the outbox gives each one.
func Render(reply channels.Reply, parts []channels.Part) ([]channels.Request, error) {
	if reply.Channel != channels.Telegram || reply.ChatID == 0 {
		return nil, fmt.Errorf("%w: %+v", ErrReplyTarget, reply)
	}
	var out []channels.Request
	send := func(text string, markup *replyMarkup) error {
		msg := SendMessage{ChatID: reply.ChatID, MessageThreadID: reply.ThreadID, Text: text, ReplyMarkup: markup}
		if len(out) == 0 && reply.ReplyToID != 0 {
			msg.ReplyParameters = &ReplyParameters{MessageID: reply.ReplyToID, AllowSendingWithoutReply: true}
		}
		req, err := channels.NewRequest(MethodSendMessage, msg)
		out = append(out, req)
		return err
	}
	for i, p := range parts {
		if err := p.Check(); err != nil {
			return nil, fmt.Errorf("render part %d: %w", i, err)
		}
		chunks := nonBlank(channels.Split(p.PromptText(), MaxText))
		if p.Kind == channels.PartText {
			for _, c := range chunks {
				if err := send(c, nil); err != nil {
					return nil, err
				}
			}
			continue
		}
		last := "Choose:"
		if len(chunks) > 0 {
			last, chunks = chunks[len(chunks)-1], chunks[:len(chunks)-1]
		}
		for _, c := range chunks {
			if err := send(c, nil); err != nil {
				return nil, err
			}
		}
		markup, err := keyboardOf(p)
		if err != nil {
			return nil, fmt.Errorf("render part %d: %w", i, err)
		}
		if err := send(last, markup); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// keyboardOf is the inline keyboard of a prompt.
func keyboardOf(p channels.Part) (*replyMarkup, error) {
	data := func(c channels.Callback) (string, error) { return c.Encode() }
	if p.Kind == channels.PartApproval {
		yes, err1 := data(channels.Callback{Kind: channels.ActionApproval, ID: p.ID, Approved: true})
		no, err2 := data(channels.Callback{Kind: channels.ActionApproval, ID: p.ID})
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		return &replyMarkup{InlineKeyboard: [][]button{{{Text: "✅ Approve", CallbackData: yes}, {Text: "❌ Deny", CallbackData: no}}}}, nil
	}
	rows := make([][]button, 0, len(p.Options))
	for i, o := range p.Options {
		d, err := data(channels.Callback{Kind: channels.ActionChoice, ID: p.ID, Option: i})
		if err != nil {
			return nil, err
		}
		rows = append(rows, []button{{Text: o.Title(), CallbackData: d}})
	}
	return &replyMarkup{InlineKeyboard: rows}, nil
}

// RenderAck is the acknowledgement of a button press a, by outcome. Every press is answered
// with answerCallbackQuery (Telegram keeps the button spinning until then) showing a short
// notice; answered, editMessageText replaces the keyboard by the verdict under the prompt
// ("✅ Approved by @ann"); expired, editMessageReplyMarkup removes the keyboard. An
// already-answered prompt was edited by the press that answered it, so only the notice is sent.
func RenderAck(a *channels.Action, outcome channels.AckOutcome) ([]channels.Request, error) {
	if a.Reply.Channel != channels.Telegram || a.Reply.ChatID == 0 || a.Ack.CallbackID == "" {
		return nil, fmt.Errorf("%w: action %+v", ErrReplyTarget, a.Reply)
	}
	answer, err := channels.NewRequest(MethodAnswerCallbackQuery, AnswerCallbackQuery{CallbackQueryID: a.Ack.CallbackID, Text: channels.AckNotice(outcome)})
	if err != nil {
		return nil, err
	}
	reqs := []channels.Request{answer}
	messageID, _ := strconv.ParseInt(a.Ack.MessageID, 10, 64)
	if messageID == 0 || outcome == channels.AckAlreadyAnswered {
		return reqs, nil
	}
	var edit channels.Request
	if outcome == channels.AckAnswered {
		verdict := a.Verdict(cmp.Or(a.User.Name, a.User.ID))
		prompt := strings.TrimSpace(a.Ack.PromptText)
		if room := MaxText - channels.UTF16Len(verdict) - 2; channels.UTF16Len(prompt) > room {
			prompt = channels.Split(prompt, room-1)[0] + "…"
		}
		edit, err = channels.NewRequest(MethodEditMessageText, EditMessage{ChatID: a.Reply.ChatID, MessageID: messageID, Text: strings.TrimSpace(prompt + "\n\n" + verdict)})
	} else {
		edit, err = channels.NewRequest(MethodEditMessageReplyMarkup, EditMessage{ChatID: a.Reply.ChatID, MessageID: messageID, ReplyMarkup: &replyMarkup{InlineKeyboard: [][]button{}}})
	}
	if err != nil {
		return nil, err
	}
	return append(reqs, edit), nil
}

// nonBlank drops the chunks Telegram would refuse as empty.
func nonBlank(chunks []string) []string {
	out := chunks[:0]
	for _, c := range chunks {
		if strings.TrimSpace(c) != "" {
			out = append(out, c)
		}
	}
	return out
}
