package loop

import (
	"strings"

	"svc/agent"
)

// DefaultBasePrompt opens the system prompt of an agent whose svc.json sets no basePrompt.
const DefaultBasePrompt = "You are a helpful assistant deployed as an agent. Follow the instructions below. " +
	"Answer accurately and concisely; when you do not know something, say so instead of guessing. " +
	"Use the tools you are given when they help, and never invent their results."

// Prompt is what the system prompt is compiled from.
type Prompt struct {
	BasePrompt   string             // svc.json basePrompt; "" means DefaultBasePrompt
	Instructions string             // the agent's AGENT.md
	Knowledge    []*agent.Knowledge // listed (name: description) when load_knowledge can read them
	Skills       []*agent.Skill     // listed (name: trigger) when load_skill can load them
	Active       *agent.Skill       // the skill of a skill-scoped session: its whole text is included
	Connections  string             // the section on the connections the request tool reaches
}

// Compile returns the system prompt with its {{context.KEY}} templates still in place; Fill
// completes it per request. The two steps let the runtime cache the compiled text.
func (p Prompt) Compile() string {
	var b strings.Builder
	base := p.BasePrompt
	if strings.TrimSpace(base) == "" {
		base = DefaultBasePrompt
	}
	b.WriteString(strings.TrimSpace(base))
	if s := strings.TrimSpace(p.Instructions); s != "" {
		b.WriteString("\n\n")
		b.WriteString(s)
	}
	if len(p.Knowledge) > 0 {
		b.WriteString("\n\n## Knowledge\nDocuments you can read with the load_knowledge tool:\n")
		for _, k := range p.Knowledge {
			b.WriteString("- ")
			b.WriteString(k.Name)
			if d := strings.TrimSpace(k.Description); d != "" {
				b.WriteString(": ")
				b.WriteString(d)
			}
			b.WriteByte('\n')
		}
	}
	if len(p.Skills) > 0 {
		b.WriteString("\n\n## Skills\nSkills you can load with the load_skill tool when their trigger applies:\n")
		for _, s := range p.Skills {
			b.WriteString("- ")
			b.WriteString(s.Name)
			if tr := strings.TrimSpace(s.Trigger); tr != "" {
				b.WriteString(": ")
				b.WriteString(tr)
			}
			b.WriteByte('\n')
		}
	}
	if s := strings.TrimSpace(p.Connections); s != "" {
		b.WriteString("\n\n")
		b.WriteString(s)
	}
	if p.Active != nil {
		b.WriteString("\n\n## Active skill: ")
		b.WriteString(p.Active.Name)
		b.WriteString("\n\n")
		b.WriteString(strings.TrimSpace(p.Active.Body))
	}
	return strings.TrimRight(b.String(), "\n")
}

// Fill replaces each {{context.KEY}} (spaces inside the braces allowed) with values[KEY]; an
// unknown key becomes the empty string. Other {{...}} text is left as is. Only the request's
// context reaches templates: metadata never does.
func Fill(text string, values map[string]string) string {
	i := strings.Index(text, "{{")
	if i < 0 {
		return text
	}
	var b strings.Builder
	b.Grow(len(text))
	for i >= 0 {
		end := strings.Index(text[i+2:], "}}")
		if end < 0 {
			break
		}
		inner := strings.TrimSpace(text[i+2 : i+2+end])
		key, ok := strings.CutPrefix(inner, "context.")
		if !ok || !isKey(key) {
			b.WriteString(text[:i+2])
			text = text[i+2:]
			i = strings.Index(text, "{{")
			continue
		}
		b.WriteString(text[:i])
		b.WriteString(values[key])
		text = text[i+2+end+2:]
		i = strings.Index(text, "{{")
	}
	b.WriteString(text)
	return b.String()
}

func isKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c == '-' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}
