package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"svc/auth"
	"svc/runner/models"
	"svc/runner/sse"
)

// Names of the interaction built-ins.
const (
	NameAskUser = "ask_user"
	NameHandoff = "handoff"
)

// Limits of ask_user's arguments.
const (
	maxAskOptions  = 20
	maxAskQuestion = 2000 // characters
	maxAskLabel    = 200  // characters of an option's value or label
)

// AskUser is the ask_user built-in (CONTRACT §7): it shows the user a question with options as
// an ask_choice frame and ends the run; the user's choice arrives as the next chat message.
type AskUser struct{ spec models.ToolSpec }

var _ Tool = (*AskUser)(nil)

// NewAskUser returns the ask_user tool.
func NewAskUser() *AskUser {
	return &AskUser{spec: models.ToolSpec{
		Name: NameAskUser,
		Description: "Ask the user a question with a fixed set of answers to choose from, shown as buttons. " +
			"The turn ends after the question; the user's choice arrives as their next message.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"question":{"type":"string","minLength":1,"maxLength":` + strconv.Itoa(maxAskQuestion) + `,"description":"The question, in the user's language."},` +
			`"options":{"type":"array","minItems":1,"maxItems":` + strconv.Itoa(maxAskOptions) + `,"description":"The answers to choose from, each value once.","items":{"type":"object","properties":{` +
			`"value":{"type":"string","minLength":1,"maxLength":` + strconv.Itoa(maxAskLabel) + `,"description":"What the user's message will say when they choose it."},` +
			`"label":{"type":"string","minLength":1,"maxLength":` + strconv.Itoa(maxAskLabel) + `,"description":"What the button shows."}},"required":["value","label"],"additionalProperties":false}},` +
			`"multi":{"type":"boolean","description":"Whether several answers may be chosen."}},` +
			`"required":["question","options"],"additionalProperties":false}`),
	}}
}

// Spec implements Tool.
func (t *AskUser) Spec() models.ToolSpec { return t.spec }

type askOption struct {
	Value string `json:"value"`
	Label string `json:"label"`
}

type askArgs struct {
	Question string      `json:"question"`
	Options  []askOption `json:"options"`
	Multi    bool        `json:"multi"`
}

// Call implements Tool. It emits ask_choice and ends the run.
func (t *AskUser) Call(ctx context.Context, call Call) (Result, error) {
	var a askArgs
	if err := decodeStrict(call.Arguments, &a); err != nil {
		return Result{}, fmt.Errorf("%w: want {\"question\": string, \"options\": [{\"value\", \"label\"}], \"multi\"?: boolean}: %v", ErrBadArguments, err)
	}
	switch {
	case strings.TrimSpace(a.Question) == "":
		return Result{}, fmt.Errorf("%w: \"question\" is required", ErrBadArguments)
	case len([]rune(a.Question)) > maxAskQuestion:
		return Result{}, fmt.Errorf("%w: \"question\" is over %d characters", ErrBadArguments, maxAskQuestion)
	case len(a.Options) == 0:
		return Result{}, fmt.Errorf("%w: \"options\" needs at least one {\"value\", \"label\"}", ErrBadArguments)
	case len(a.Options) > maxAskOptions:
		return Result{}, fmt.Errorf("%w: \"options\" has %d entries; at most %d", ErrBadArguments, len(a.Options), maxAskOptions)
	}
	seen := make([]string, 0, len(a.Options))
	for i, o := range a.Options {
		switch {
		case strings.TrimSpace(o.Value) == "":
			return Result{}, fmt.Errorf("%w: \"options[%d].value\" is required", ErrBadArguments, i)
		case o.Label == "":
			return Result{}, fmt.Errorf("%w: \"options[%d].label\" is required", ErrBadArguments, i)
		case len([]rune(o.Value)) > maxAskLabel || len([]rune(o.Label)) > maxAskLabel:
			return Result{}, fmt.Errorf("%w: \"options[%d]\": value and label are at most %d characters", ErrBadArguments, i, maxAskLabel)
		case slices.Contains(seen, o.Value):
			return Result{}, fmt.Errorf("%w: \"options[%d].value\" %q repeats an earlier option", ErrBadArguments, i, o.Value)
		}
		seen = append(seen, o.Value)
	}
	opts, err := json.Marshal(a.Options)
	if err != nil {
		return Result{}, err
	}
	id := auth.NewID("ask_")
	if call.Host != nil {
		if err := call.Host.Emit(&sse.Frame{Type: sse.TypeAskChoice, AskID: id, Question: a.Question, Options: opts, Multi: a.Multi}); err != nil {
			return Result{}, fmt.Errorf("ask_user: %w", err)
		}
	}
	return Result{
		Content: "The question was shown to the user (ask_id " + id + "). Their choice will arrive as their next message; stop here.",
		EndRun:  true,
	}, nil
}

// Handoff is the handoff built-in (CONTRACT §7): it switches the session's root agent to one
// of the others, from the next model call on. The loop makes the switch (Result.Handoff).
type Handoff struct {
	targets []string
	spec    models.ToolSpec
}

var _ Tool = (*Handoff)(nil)

// NewHandoff returns handoff over targets, the agents a session may switch to.
func NewHandoff(targets []string) *Handoff {
	targets = slices.Sorted(slices.Values(targets))
	enum, _ := json.Marshal(targets) // strings always marshal
	return &Handoff{targets: targets, spec: models.ToolSpec{
		Name: NameHandoff,
		Description: "Hand the conversation over to another agent, which answers from your next step on with its own instructions and tools. " +
			"Agents: " + strings.Join(targets, ", ") + ".",
		Parameters: json.RawMessage(`{"type":"object","properties":{"agent":{"type":"string","description":"The agent to hand over to.","enum":` +
			string(enum) + `}},"required":["agent"],"additionalProperties":false}`),
	}}
}

// Spec implements Tool.
func (t *Handoff) Spec() models.ToolSpec { return t.spec }

// Call implements Tool.
func (t *Handoff) Call(ctx context.Context, call Call) (Result, error) {
	var a struct {
		Agent string `json:"agent"`
	}
	if err := decodeStrict(call.Arguments, &a); err != nil {
		return Result{}, fmt.Errorf("%w: want {\"agent\": string}: %v", ErrBadArguments, err)
	}
	if !slices.Contains(t.targets, a.Agent) {
		return Result{}, fmt.Errorf("%w: \"agent\" must be one of %s, got %q", ErrBadArguments, strings.Join(t.targets, ", "), a.Agent)
	}
	return Result{Content: "Handed over to agent " + a.Agent + ".", Handoff: a.Agent}, nil
}
