package webhook

import (
	"encoding/json"
	"strings"

	"svc/runner/channels"
)

// delivery is an inbound body.
type delivery struct {
	ID           string  `json:"id"`
	Conversation string  `json:"conversation"`
	User         string  `json:"user"`
	Text         string  `json:"text"`
	Action       *action `json:"action"`
}

// action answers a prompt.
type action struct {
	Type     string `json:"type"`
	ID       string `json:"id"`
	Approved bool   `json:"approved"`
	Option   *int   `json:"option"`
}

// Parse reads a verified delivery: a *channels.Message for {"id", "text", ...}, a
// *channels.Action for {"id", "action": ...}, channels.Ignored for a body with neither text nor
// action, and a *channels.PayloadError naming the field when the body cannot be read. A webhook
// message is always Addressed.
func Parse(body []byte) (channels.Event, error) {
	var d delivery
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, payloadError("body", "not a JSON object: "+err.Error())
	}
	if strings.TrimSpace(d.ID) == "" {
		return nil, payloadError("id", "missing")
	}
	key := "webhook:" + d.ID
	if d.Conversation != "" {
		key = "webhook:" + d.Conversation
	}
	reply := channels.Reply{Channel: channels.Webhook, Conversation: d.Conversation, InReplyTo: d.ID}
	user := channels.User{ID: d.User}
	if d.Action != nil {
		cb := channels.Callback{ID: d.Action.ID}
		switch d.Action.Type {
		case "approval":
			cb.Kind, cb.Approved = channels.ActionApproval, d.Action.Approved
		case "choice":
			if d.Action.Option == nil {
				return nil, payloadError("action.option", "missing")
			}
			cb.Kind, cb.Option = channels.ActionChoice, *d.Action.Option
		default:
			return nil, payloadError("action.type", `want "approval" or "choice"`)
		}
		if _, err := cb.Encode(); err != nil {
			return nil, payloadError("action", err.Error())
		}
		return &channels.Action{Channel: channels.Webhook, DeliveryID: d.ID, ConversationKey: key, Callback: cb, User: user, Reply: reply}, nil
	}
	text := strings.TrimSpace(d.Text)
	if text == "" {
		return channels.Ignored{Reason: "a delivery without text or action"}, nil
	}
	return &channels.Message{
		Channel: channels.Webhook, DeliveryID: d.ID, ConversationKey: key,
		User: user, Text: text, Addressed: true, Reply: reply,
	}, nil
}

func payloadError(field, reason string) error {
	return &channels.PayloadError{Channel: channels.Webhook, Field: field, Reason: reason}
}
