package channels

import (
	"errors"
	"fmt"
	"time"
)

// Channel names a messaging platform, as in svc.json's channels and the route
// /channels/{channel}/webhook.
type Channel string

// The channels of CONTRACT §10.
const (
	Slack    Channel = "slack"
	Telegram Channel = "telegram"
	Webhook  Channel = "webhook"
)

// MaxSkew is how far a signed delivery's timestamp may be from now, either way (Slack's and the
// signed webhook's 5 minutes).
const MaxSkew = 5 * time.Minute

// ErrUnauthorized is wrapped by every verification failure; the route answers it 401 and
// records nothing. Use errors.As with *VerifyError to learn the header and the reason.
var ErrUnauthorized = errors.New("channels: delivery not authorized")

// VerifyError says why a delivery failed verification: which header, and what was wrong with it
// (missing, malformed, stale timestamp, bad signature, wrong secret). It matches ErrUnauthorized.
// The reason never contains the secret or the expected signature.
type VerifyError struct {
	Header string
	Reason string
}

// Error implements error.
func (e *VerifyError) Error() string {
	return fmt.Sprintf("channels: delivery not authorized: %s: %s", e.Header, e.Reason)
}

// Unwrap returns ErrUnauthorized.
func (e *VerifyError) Unwrap() error { return ErrUnauthorized }

// The reasons of a VerifyError, shared so that callers and tests can tell them apart.
const (
	ReasonMissing      = "missing header"
	ReasonMalformed    = "malformed header"
	ReasonStale        = "timestamp outside 5 minutes of now"
	ReasonBadSignature = "bad signature"
	ReasonWrongSecret  = "wrong secret"
	ReasonNoSecret     = "no secret configured"
)

// Unauthorized returns a *VerifyError for header with reason.
func Unauthorized(header, reason string) error {
	return &VerifyError{Header: header, Reason: reason}
}

// CheckSkew returns a *VerifyError for header when ts is more than MaxSkew from now.
func CheckSkew(header string, ts, now time.Time) error {
	if skew := now.Sub(ts); skew > MaxSkew || skew < -MaxSkew {
		return Unauthorized(header, ReasonStale)
	}
	return nil
}

// PayloadError says that a verified body cannot be read: which field, and what is wrong. A route
// answers it 400 (the sender's bug, not worth a retry).
type PayloadError struct {
	Channel Channel
	Field   string
	Reason  string
}

// Error implements error.
func (e *PayloadError) Error() string {
	return fmt.Sprintf("channels: %s payload: %s: %s", e.Channel, e.Field, e.Reason)
}

// Event is what Parse makes of a verified delivery: exactly one of Challenge, *Message, *Action
// or Ignored. Switch on its type.
type Event interface {
	event()
}

// Challenge is Slack's url_verification: the route answers {"challenge": Value} and does nothing
// else.
type Challenge struct {
	Value string
}

// Ignored is a delivery that needs no turn (a bot's or the agent's own message, an edit, a join,
// an update without text): the route answers 200 and records nothing. Reason says why, for logs.
type Ignored struct {
	Reason string
}

func (Challenge) event() {}
func (Ignored) event()   {}
func (*Message) event()  {}
func (*Action) event()   {}

// User is who sent a message or pressed a button, as the platform names them. It is recorded as
// the session's metadata channel_user, never as a verified user.
type User struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// Message is one inbound message that may start or continue a turn.
type Message struct {
	Channel Channel `json:"channel"`
	// DeliveryID is the dedupe key, kept for 24 h: Slack's event_id, Telegram's
	// "update:<update_id>", the webhook body's id.
	DeliveryID string `json:"delivery_id"`
	// ConversationKey names the session, stable across the messages of one thread:
	// "slack:<team>:<channel>:<thread_ts>" (the message's own ts when it starts a thread),
	// "telegram:<chat>:<message_thread_id>" (0 outside forum topics), "webhook:<conversation>".
	ConversationKey string `json:"conversation_key"`
	// ScopeID is the session's scope_id: "slack:<team>:<channel>", "telegram:<chat>"; empty for
	// the webhook (the agent-level scope: the shared secret is the credential).
	ScopeID string `json:"scope_id,omitempty"`
	User    User   `json:"user"`
	Text    string `json:"text"`
	// Addressed is true when the message is meant for the agent: a direct message, a mention, a
	// private chat, a webhook. A message that is not addressed (a reply in a channel thread without
	// a mention) continues a conversation whose session exists and is otherwise ignored.
	Addressed bool `json:"addressed"`
	// Reply is where the answer goes: the same thread.
	Reply Reply `json:"reply"`
}

// Reply is where an answer goes, opaque to the caller: store it with the outbox entry and hand it
// back to Render. Each platform reads its own fields.
type Reply struct {
	Channel Channel `json:"channel"`
	// Slack: the channel, the thread's ts, and the user (for ephemeral notices).
	SlackChannel string `json:"slack_channel,omitempty"`
	ThreadTS     string `json:"thread_ts,omitempty"`
	SlackUser    string `json:"slack_user,omitempty"`
	// Telegram: the chat, the forum topic (0: none) and the message answered (0: none).
	ChatID    int64 `json:"chat_id,omitempty"`
	ThreadID  int64 `json:"message_thread_id,omitempty"`
	ReplyToID int64 `json:"reply_to_message_id,omitempty"`
	// Webhook: the conversation and the delivery answered.
	Conversation string `json:"conversation,omitempty"`
	InReplyTo    string `json:"in_reply_to,omitempty"`
}

// ActionKind tells an approval's button from a question's.
type ActionKind string

// The kinds of Action, also the first field of a button's callback data.
const (
	ActionApproval ActionKind = "a"
	ActionChoice   ActionKind = "q"
)

// Action is a button press: the answer to an approval (confirmation_required) or a question
// (ask_choice). The caller answers it once (the approvals store's 409 says it was answered
// already) and renders the acknowledgement with the platform's RenderAck.
type Action struct {
	Channel Channel `json:"channel"`
	// DeliveryID is the dedupe key: Telegram's "update:<update_id>", Slack's
	// "action:<trigger_id>", the webhook body's id.
	DeliveryID      string `json:"delivery_id"`
	ConversationKey string `json:"conversation_key"`
	ScopeID         string `json:"scope_id,omitempty"`
	Callback
	// Label is the text of the button pressed, for the acknowledgement.
	Label string `json:"label,omitempty"`
	User  User   `json:"user"`
	// Reply is the thread the prompt is in.
	Reply Reply `json:"reply"`
	// Ack is what the acknowledgement needs: the prompt's message and the platform's callback id.
	Ack Ack `json:"ack"`
}

// Ack names the prompt a button press answered, for RenderAck.
type Ack struct {
	// CallbackID is Telegram's callback_query id (answerCallbackQuery).
	CallbackID string `json:"callback_id,omitempty"`
	// MessageID is the prompt's message: Slack's ts, Telegram's message_id.
	MessageID string `json:"message_id,omitempty"`
	// PromptText is the prompt's text as the platform showed it, kept when the buttons are removed.
	PromptText string `json:"prompt_text,omitempty"`
}

// AckOutcome is what became of a button press, as the acknowledgement shows it.
type AckOutcome string

// The outcomes of a button press.
const (
	// AckAnswered: this press answered the approval or question; the buttons are replaced by the
	// choice made.
	AckAnswered AckOutcome = "answered"
	// AckAlreadyAnswered: an earlier press (or another route) answered it; the presser is told so.
	AckAlreadyAnswered AckOutcome = "already_answered"
	// AckExpired: nothing waits for this answer any more (timed out, unknown id).
	AckExpired AckOutcome = "expired"
)
