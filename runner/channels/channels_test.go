package channels_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"svc/runner/channels"
)

func TestVerifyErrorMatchesUnauthorized(t *testing.T) {
	err := channels.Unauthorized("X-Slack-Signature", channels.ReasonBadSignature)
	if !errors.Is(err, channels.ErrUnauthorized) {
		t.Fatalf("%v does not match ErrUnauthorized", err)
	}
	ve, ok := errors.AsType[*channels.VerifyError](err)
	if !ok || ve.Header != "X-Slack-Signature" || ve.Reason != channels.ReasonBadSignature {
		t.Errorf("VerifyError = %+v", ve)
	}
	if !strings.Contains(err.Error(), "X-Slack-Signature") || !strings.Contains(err.Error(), "bad signature") {
		t.Errorf("Error() = %q, want the header and the reason", err)
	}
}

func TestCheckSkew(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for _, tt := range []struct {
		skew time.Duration
		ok   bool
	}{{0, true}, {5 * time.Minute, true}, {-5 * time.Minute, true}, {5*time.Minute + time.Second, false}, {-6 * time.Minute, false}} {
		err := channels.CheckSkew("X-Svc-Timestamp", now.Add(tt.skew), now)
		if (err == nil) != tt.ok {
			t.Errorf("CheckSkew(%s) = %v, want ok %v", tt.skew, err, tt.ok)
		}
	}
}

func TestPartCheck(t *testing.T) {
	opts := func(n int) []channels.Option {
		out := make([]channels.Option, n)
		for i := range out {
			out[i] = channels.Option{Value: "v", Label: "l"}
		}
		return out
	}
	tests := []struct {
		name string
		part channels.Part
		ok   bool
	}{
		{"text", channels.TextPart("hi"), true},
		{"approval", channels.ApprovalPart("apr_1", "Refund?"), true},
		{"approval without id", channels.ApprovalPart("", "Refund?"), false},
		{"choice", channels.ChoicePart("ask_1", "Plan?", opts(3), false), true},
		{"choice without options", channels.ChoicePart("ask_1", "Plan?", nil, false), false},
		{"choice with too many options", channels.ChoicePart("ask_1", "Plan?", opts(channels.MaxOptions+1), false), false},
		{"choice with a blank option", channels.ChoicePart("ask_1", "Plan?", []channels.Option{{}}, false), false},
		{"unknown kind", channels.Part{Kind: "video"}, false},
	}
	for _, tt := range tests {
		if err := tt.part.Check(); (err == nil) != tt.ok {
			t.Errorf("%s: Check = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

func TestVerdict(t *testing.T) {
	approve := &channels.Action{Callback: channels.Callback{Kind: channels.ActionApproval, Approved: true}}
	deny := &channels.Action{Callback: channels.Callback{Kind: channels.ActionApproval}}
	choose := &channels.Action{Callback: channels.Callback{Kind: channels.ActionChoice, Option: 1}, Label: "Pro"}
	unlabeled := &channels.Action{Callback: channels.Callback{Kind: channels.ActionChoice, Option: 1}}
	for _, tt := range []struct {
		a    *channels.Action
		want string
	}{{approve, "✅ Approved by Ann"}, {deny, "❌ Denied by Ann"}, {choose, "☑️ Ann chose Pro"}, {unlabeled, "☑️ Ann chose option 2"}} {
		if got := tt.a.Verdict("Ann"); got != tt.want {
			t.Errorf("Verdict = %q, want %q", got, tt.want)
		}
	}
}

// TestEventsRoundTripJSON: a Message and an Action survive JSON, as they do in a queued task.
func TestEventsRoundTripJSON(t *testing.T) {
	m := &channels.Message{Channel: channels.Slack, DeliveryID: "Ev1", ConversationKey: "slack:T:C:1.2", ScopeID: "slack:T:C",
		User: channels.User{ID: "U1"}, Text: "hi", Addressed: true, Reply: channels.Reply{Channel: channels.Slack, SlackChannel: "C", ThreadTS: "1.2"}}
	a := &channels.Action{Channel: channels.Telegram, DeliveryID: "update:1", Callback: channels.Callback{Kind: channels.ActionChoice, ID: "ask_1", Option: 2},
		Label: "Pro", Reply: channels.Reply{Channel: channels.Telegram, ChatID: -100, ThreadID: 4}, Ack: channels.Ack{CallbackID: "cb", MessageID: "9"}}
	for _, v := range []any{m, a} {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		back := reflect.New(reflect.TypeOf(v).Elem()).Interface()
		if err := json.Unmarshal(data, back); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(v, back); diff != "" {
			t.Errorf("%s round trip (-want +got):\n%s", data, diff)
		}
	}
}
