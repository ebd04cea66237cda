package telegram

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"

	"svc/runner/channels"
)

// Parser reads verified Telegram updates. Its zero value works.
type Parser struct {
	// BotUsername is the bot's username without "@" ("svc_agent_bot"): only mentions of it address
	// the agent and a leading mention of it is cut from the text. When empty, any mention does and
	// none is cut.
	BotUsername string
}

// Parse reads a verified update with a zero Parser: see Parser.Parse.
func Parse(body []byte) (channels.Event, error) { return Parser{}.Parse(body) }

// Parse reads a verified update. It returns
//
//   - *channels.Message for a message with text from a person;
//   - *channels.Action for a callback_query of one of the agent's buttons;
//   - channels.Ignored for the rest: a bot's message (from.is_bot), an edited message, a channel
//     post, a message without text (a photo, a sticker, a service message), other update kinds,
//     another keyboard's callback;
//
// and a *channels.PayloadError naming the field when the body cannot be read.
func (p Parser) Parse(body []byte) (channels.Event, error) {
	var u update
	if err := json.Unmarshal(body, &u); err != nil {
		return nil, payloadError("body", "not JSON: "+err.Error())
	}
	if u.UpdateID == nil {
		return nil, payloadError("update_id", "missing")
	}
	delivery := "update:" + strconv.FormatInt(*u.UpdateID, 10)
	switch {
	case u.Message != nil:
		return p.parseMessage(delivery, u.Message)
	case u.CallbackQuery != nil:
		return parseCallback(delivery, u.CallbackQuery)
	case u.EditedMessage != nil:
		return channels.Ignored{Reason: "an edited message"}, nil
	case u.ChannelPost != nil || u.EditedChannelPost != nil:
		return channels.Ignored{Reason: "a channel post"}, nil
	}
	return channels.Ignored{Reason: "an update without message or callback_query"}, nil
}

// update is a Telegram Update: the kinds that matter here.
type update struct {
	UpdateID          *int64          `json:"update_id"`
	Message           *message        `json:"message"`
	EditedMessage     json.RawMessage `json:"edited_message"`
	ChannelPost       json.RawMessage `json:"channel_post"`
	EditedChannelPost json.RawMessage `json:"edited_channel_post"`
	CallbackQuery     *callbackQuery  `json:"callback_query"`
}

type user struct {
	ID        int64  `json:"id"`
	IsBot     bool   `json:"is_bot"`
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name"`
	Username  string `json:"username"`
}

type message struct {
	MessageID       int64 `json:"message_id"`
	MessageThreadID int64 `json:"message_thread_id"`
	IsTopicMessage  bool  `json:"is_topic_message"`
	From            *user `json:"from"`
	Chat            *struct {
		ID   int64  `json:"id"`
		Type string `json:"type"`
	} `json:"chat"`
	Text     string `json:"text"`
	Entities []struct {
		Type   string `json:"type"`
		Offset int    `json:"offset"`
		Length int    `json:"length"`
	} `json:"entities"`
	ReplyToMessage *message     `json:"reply_to_message"`
	ReplyMarkup    *replyMarkup `json:"reply_markup"`
}

type callbackQuery struct {
	ID      string   `json:"id"`
	From    *user    `json:"from"`
	Message *message `json:"message"`
	Data    string   `json:"data"`
}

func (p Parser) parseMessage(delivery string, m *message) (channels.Event, error) {
	switch {
	case m.From == nil:
		return channels.Ignored{Reason: "a message without sender"}, nil
	case m.From.IsBot:
		return channels.Ignored{Reason: "a bot's message"}, nil
	case m.Chat == nil:
		return nil, payloadError("message.chat", "missing")
	case strings.TrimSpace(m.Text) == "":
		return channels.Ignored{Reason: "a message without text"}, nil
	}
	text, addressed := m.Text, m.Chat.Type == "private"
	mention := "@" + p.BotUsername
	for _, e := range m.Entities {
		switch e.Type {
		case "bot_command":
			addressed = addressed || e.Offset == 0
		case "mention":
			if p.BotUsername == "" || strings.EqualFold(entityText(m.Text, e.Offset, e.Length), mention) {
				addressed = true
			}
		}
	}
	if r := m.ReplyToMessage; r != nil && r.From != nil && r.From.IsBot && (p.BotUsername == "" || strings.EqualFold(r.From.Username, p.BotUsername)) {
		addressed = true
	}
	if p.BotUsername != "" && len(text) >= len(mention) && strings.EqualFold(text[:len(mention)], mention) {
		text = text[len(mention):]
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return channels.Ignored{Reason: "a message without text"}, nil
	}
	thread := topicOf(m)
	return &channels.Message{
		Channel:         channels.Telegram,
		DeliveryID:      delivery,
		ConversationKey: conversationKey(m.Chat.ID, thread),
		ScopeID:         scopeID(m.Chat.ID),
		User:            userOf(m.From),
		Text:            text,
		Addressed:       addressed,
		Reply:           channels.Reply{Channel: channels.Telegram, ChatID: m.Chat.ID, ThreadID: thread, ReplyToID: m.MessageID},
	}, nil
}

func parseCallback(delivery string, q *callbackQuery) (channels.Event, error) {
	switch {
	case q.ID == "":
		return nil, payloadError("callback_query.id", "missing")
	case q.From == nil:
		return nil, payloadError("callback_query.from", "missing")
	case q.Message == nil || q.Message.Chat == nil:
		return channels.Ignored{Reason: "a callback without its message (an inline message)"}, nil
	}
	cb, err := channels.DecodeCallback(q.Data)
	if err != nil {
		return channels.Ignored{Reason: "not an svc button: " + err.Error()}, nil
	}
	m := q.Message
	label := ""
	if m.ReplyMarkup != nil {
		for _, row := range m.ReplyMarkup.InlineKeyboard {
			for _, b := range row {
				if b.CallbackData == q.Data {
					label = b.Text
				}
			}
		}
	}
	thread := topicOf(m)
	return &channels.Action{
		Channel:         channels.Telegram,
		DeliveryID:      delivery,
		ConversationKey: conversationKey(m.Chat.ID, thread),
		ScopeID:         scopeID(m.Chat.ID),
		Callback:        cb,
		Label:           label,
		User:            userOf(q.From),
		Reply:           channels.Reply{Channel: channels.Telegram, ChatID: m.Chat.ID, ThreadID: thread},
		Ack:             channels.Ack{CallbackID: q.ID, MessageID: strconv.FormatInt(m.MessageID, 10), PromptText: m.Text},
	}, nil
}

// topicOf is the forum topic of m, or 0: message_thread_id counts only for topic messages (a reply
// thread of an ordinary group is not a place sendMessage can post to).
func topicOf(m *message) int64 {
	if m.IsTopicMessage {
		return m.MessageThreadID
	}
	return 0
}

// userOf is the sender as metadata: the numeric id, and @username or else the full name.
func userOf(u *user) channels.User {
	name := strings.TrimSpace(u.FirstName + " " + u.LastName)
	if u.Username != "" {
		name = "@" + u.Username
	}
	return channels.User{ID: strconv.FormatInt(u.ID, 10), Name: name}
}

// entityText is the text of an entity, whose offset and length count UTF-16 code units.
func entityText(text string, offset, length int) string {
	units := utf16.Encode([]rune(text))
	if offset < 0 || length < 0 || offset+length > len(units) {
		return ""
	}
	return string(utf16.Decode(units[offset : offset+length]))
}

func conversationKey(chat, thread int64) string {
	return "telegram:" + strconv.FormatInt(chat, 10) + ":" + strconv.FormatInt(thread, 10)
}

func scopeID(chat int64) string { return "telegram:" + strconv.FormatInt(chat, 10) }

func payloadError(field, reason string) error {
	return &channels.PayloadError{Channel: channels.Telegram, Field: field, Reason: reason}
}
