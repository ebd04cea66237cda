package channels

import (
	"fmt"
	"strings"
)

// PartKind tells the parts of a reply apart.
type PartKind string

// The kinds of Part.
const (
	// PartText is answer text, split at the platform's limits.
	PartText PartKind = "text"
	// PartApproval is a confirmation_required prompt: Text, then Approve and Deny buttons
	// carrying ID (the correlation id).
	PartApproval PartKind = "approval"
	// PartChoice is an ask_choice question: Text, then one button per option carrying ID (the
	// ask id) and the option's index.
	PartChoice PartKind = "choice"
)

// Option is one answer of a question, as ask_user gives it.
type Option struct {
	Value string `json:"value"`
	Label string `json:"label"`
}

// Part is one piece of an outbound reply.
type Part struct {
	Kind PartKind `json:"kind"`
	// Text is the answer text, or the prompt's text (an approval's description, the question).
	Text string `json:"text"`
	// ID is the approval's correlation id or the question's ask id (prompts only).
	ID string `json:"id,omitempty"`
	// Options are a question's answers (PartChoice only), at most MaxOptions.
	Options []Option `json:"options,omitempty"`
	// Multi is a question that takes several answers: each button answers one; the platform's
	// text says more can be written as a message.
	Multi bool `json:"multi,omitempty"`
}

// TextPart is a PartText of s.
func TextPart(s string) Part { return Part{Kind: PartText, Text: s} }

// ApprovalPart is a PartApproval prompt for the approval id, described by text.
func ApprovalPart(id, text string) Part { return Part{Kind: PartApproval, ID: id, Text: text} }

// ChoicePart is a PartChoice prompt for the question id.
func ChoicePart(id, question string, options []Option, multi bool) Part {
	return Part{Kind: PartChoice, ID: id, Text: question, Options: options, Multi: multi}
}

// Check reports the first problem of p that no platform can render: an unknown kind, a prompt
// without id or buttons, an id the callback data cannot carry, too many options.
func (p Part) Check() error {
	switch p.Kind {
	case PartText:
		return nil
	case PartApproval:
		_, err := Callback{Kind: ActionApproval, ID: p.ID}.Encode()
		return err
	case PartChoice:
		if len(p.Options) == 0 || len(p.Options) > MaxOptions {
			return fmt.Errorf("channels: choice %q has %d options, want 1 to %d", p.ID, len(p.Options), MaxOptions)
		}
		for i, o := range p.Options {
			if strings.TrimSpace(o.Label) == "" && strings.TrimSpace(o.Value) == "" {
				return fmt.Errorf("channels: choice %q option %d has neither label nor value", p.ID, i)
			}
		}
		_, err := Callback{Kind: ActionChoice, ID: p.ID, Option: len(p.Options) - 1}.Encode()
		return err
	}
	return fmt.Errorf("channels: part kind %q is not text, approval or choice", p.Kind)
}

// Title is how a button shows the option: its label, else its value.
func (o Option) Title() string {
	if strings.TrimSpace(o.Label) != "" {
		return o.Label
	}
	return o.Value
}

// PromptText is the text a platform shows above a prompt's buttons: the part's text, and for a
// question that takes several answers, how to give more than one.
func (p Part) PromptText() string {
	if p.Kind == PartChoice && p.Multi {
		return p.Text + "\n\n(Several answers? Write them in a reply.)"
	}
	return p.Text
}

// Verdict is the line an acknowledgement shows in place of the buttons of a prompt answered by
// a: "✅ Approved by Ann", "❌ Denied by Ann", "☑️ Ann chose Pro".
func (a *Action) Verdict(who string) string {
	switch {
	case a.Kind == ActionApproval && a.Approved:
		return "✅ Approved by " + who
	case a.Kind == ActionApproval:
		return "❌ Denied by " + who
	}
	label := a.Label
	if label == "" {
		label = fmt.Sprintf("option %d", a.Option+1)
	}
	return "☑️ " + who + " chose " + label
}

// AckNotice is the short notice shown to whoever pressed a button, by outcome.
func AckNotice(outcome AckOutcome) string {
	switch outcome {
	case AckAnswered:
		return "Thanks, answered."
	case AckAlreadyAnswered:
		return "This was already answered."
	}
	return "This is no longer waiting for an answer."
}
