package webhook

import (
	"errors"
	"fmt"
	"strings"

	"svc/runner/channels"
)

// MethodReply is the webhook's only method: a POST of a ReplyBody to the replyUrl.
const MethodReply = "reply"

// ReplyBody is what the replyUrl receives: the answer's text (all text parts), and every part as
// it is, prompts included, so the receiver can show buttons and answer them with an "action"
// delivery. An acknowledgement carries Ack instead of parts.
type ReplyBody struct {
	InReplyTo    string          `json:"in_reply_to"`
	Conversation string          `json:"conversation,omitempty"`
	Text         string          `json:"text,omitempty"`
	Parts        []channels.Part `json:"parts,omitempty"`
	Ack          *AckBody        `json:"ack,omitempty"`
}

// AckBody tells the receiver what became of an action it sent.
type AckBody struct {
	ID      string              `json:"id"`
	Outcome channels.AckOutcome `json:"outcome"`
}

// ErrReplyTarget is returned by Render for a Reply that is not the webhook's.
var ErrReplyTarget = errors.New("webhook: reply target is not a webhook delivery")

// Render turns the parts of a reply into one reply POST: the webhook has no length limit to split
// at. No parts, or only blank text, send nothing.
func Render(reply channels.Reply, parts []channels.Part) ([]channels.Request, error) {
	if reply.Channel != channels.Webhook || reply.InReplyTo == "" {
		return nil, fmt.Errorf("%w: %+v", ErrReplyTarget, reply)
	}
	body := ReplyBody{InReplyTo: reply.InReplyTo, Conversation: reply.Conversation}
	var texts []string
	for i, p := range parts {
		if err := p.Check(); err != nil {
			return nil, fmt.Errorf("render part %d: %w", i, err)
		}
		if p.Kind == channels.PartText {
			if strings.TrimSpace(p.Text) == "" {
				continue
			}
			texts = append(texts, p.Text)
		}
		body.Parts = append(body.Parts, p)
	}
	if len(body.Parts) == 0 {
		return nil, nil
	}
	body.Text = strings.Join(texts, "\n\n")
	req, err := channels.NewRequest(MethodReply, body)
	if err != nil {
		return nil, err
	}
	return []channels.Request{req}, nil
}

// RenderAck is the acknowledgement of an action: one reply POST whose ack says the outcome.
func RenderAck(a *channels.Action, outcome channels.AckOutcome) ([]channels.Request, error) {
	if a.Reply.Channel != channels.Webhook || a.Reply.InReplyTo == "" {
		return nil, fmt.Errorf("%w: action %+v", ErrReplyTarget, a.Reply)
	}
	req, err := channels.NewRequest(MethodReply, ReplyBody{
		InReplyTo: a.Reply.InReplyTo, Conversation: a.Reply.Conversation, Ack: &AckBody{ID: a.ID, Outcome: outcome},
	})
	if err != nil {
		return nil, err
	}
	return []channels.Request{req}, nil
}
