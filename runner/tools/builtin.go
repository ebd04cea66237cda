package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"svc/agent"
	"svc/runner/models"
	"svc/runner/sse"
)

// Names of the built-in tools.
const (
	NameLoadKnowledge = "load_knowledge"
	NameLoadSkill     = "load_skill"
)

// nameArgs is the argument object of both built-ins.
type nameArgs struct {
	Name string `json:"name"`
}

func parseName(raw json.RawMessage, known []string) (string, error) {
	var a nameArgs
	if err := decodeStrict(raw, &a); err != nil {
		return "", fmt.Errorf("%w: want {\"name\": string}: %v", ErrBadArguments, err)
	}
	if a.Name == "" {
		return "", fmt.Errorf("%w: \"name\" is required (one of %s)", ErrBadArguments, strings.Join(known, ", "))
	}
	return a.Name, nil
}

// decodeStrict decodes the JSON object raw into v, refusing fields v does not have (as the
// tools' schemas say, "additionalProperties": false). Empty raw is {}.
func decodeStrict(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func nameSchema(what string, names []string) json.RawMessage {
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"name": map[string]any{"type": "string", "description": "Name of the " + what + ".", "enum": names},
		},
		"required":             []string{"name"},
		"additionalProperties": false,
	}
	b, err := json.Marshal(schema)
	if err != nil { // unreachable: the schema is plain data
		panic(err)
	}
	return b
}

func labelName(args json.RawMessage) string {
	var a nameArgs
	if json.Unmarshal(args, &a) != nil {
		return ""
	}
	return a.Name
}

// LoadKnowledge is the load_knowledge tool: it returns the body of a knowledge document.
type LoadKnowledge struct {
	docs  map[string]*agent.Knowledge
	names []string
	spec  models.ToolSpec
}

var (
	_ Tool    = (*LoadKnowledge)(nil)
	_ Labeler = (*LoadKnowledge)(nil)
)

// NewLoadKnowledge returns load_knowledge over docs (by name).
func NewLoadKnowledge(docs map[string]*agent.Knowledge) *LoadKnowledge {
	names := sortedNames(docs)
	return &LoadKnowledge{docs: docs, names: names, spec: models.ToolSpec{
		Name:        NameLoadKnowledge,
		Description: "Read a knowledge document by name. The documents and what they cover are listed in the instructions.",
		Parameters:  nameSchema("knowledge document", names),
	}}
}

// Spec implements Tool.
func (t *LoadKnowledge) Spec() models.ToolSpec { return t.spec }

// Labels implements Labeler.
func (t *LoadKnowledge) Labels(args json.RawMessage) (string, string) {
	n := labelName(args)
	return "Reading " + n, "Read " + n
}

// Call implements Tool.
func (t *LoadKnowledge) Call(ctx context.Context, call Call) (Result, error) {
	name, err := parseName(call.Arguments, t.names)
	if err != nil {
		return Result{}, err
	}
	doc, ok := t.docs[name]
	if !ok {
		return Result{}, fmt.Errorf("%w: unknown knowledge document %q (known: %s)", ErrBadArguments, name, strings.Join(t.names, ", "))
	}
	if call.Host != nil {
		call.Host.NoteKnowledge(name)
	}
	return Result{Content: doc.Body}, nil
}

// LoadSkill is the load_skill tool: it returns a skill's instructions and marks it active.
type LoadSkill struct {
	skills map[string]*agent.Skill
	names  []string
	spec   models.ToolSpec
}

var (
	_ Tool    = (*LoadSkill)(nil)
	_ Labeler = (*LoadSkill)(nil)
)

// NewLoadSkill returns load_skill over skills (by name).
func NewLoadSkill(skills map[string]*agent.Skill) *LoadSkill {
	names := sortedNames(skills)
	return &LoadSkill{skills: skills, names: names, spec: models.ToolSpec{
		Name:        NameLoadSkill,
		Description: "Load a skill: its behaviour and constraints, to follow from now on. The skills and when to use them are listed in the instructions.",
		Parameters:  nameSchema("skill", names),
	}}
}

// Spec implements Tool.
func (t *LoadSkill) Spec() models.ToolSpec { return t.spec }

// Labels implements Labeler.
func (t *LoadSkill) Labels(args json.RawMessage) (string, string) {
	n := labelName(args)
	return "Loading skill " + n, "Loaded skill " + n
}

// Call implements Tool. It emits skill_activated.
func (t *LoadSkill) Call(ctx context.Context, call Call) (Result, error) {
	name, err := parseName(call.Arguments, t.names)
	if err != nil {
		return Result{}, err
	}
	sk, ok := t.skills[name]
	if !ok {
		return Result{}, fmt.Errorf("%w: unknown skill %q (known: %s)", ErrBadArguments, name, strings.Join(t.names, ", "))
	}
	if call.Host != nil {
		call.Host.ActivateSkill(name)
		if err := call.Host.Emit(&sse.Frame{Type: sse.TypeSkillActivated, SkillName: name}); err != nil {
			return Result{}, fmt.Errorf("load_skill: %w", err)
		}
	}
	return Result{Content: sk.Body}, nil
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}
