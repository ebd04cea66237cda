package agent

import (
	"strings"
)

// parseSkill reads svc/skills/<dir>/SKILL.md. It returns nil when the file has no usable
// "# Skill: <name>" heading, since the skill then has no name to be found by.
func parseSkill(file, dir string, data []byte, c *collector) *Skill {
	text, ok := markdownText(file, data, c)
	if !ok {
		return nil
	}
	doc := splitMarkdown(text)
	name, line, found := doc.heading("# Skill:")
	valid := true
	switch {
	case doc.head < 0:
		c.add(file, 1, `empty file: a skill starts with the heading "# Skill: <name>"`)
		valid = false
	case !found:
		c.add(file, line, `first line must be the heading "# Skill: <name>", got %q`, quoteLine(doc.lines[doc.head]))
		valid = false
	case name == "":
		c.add(file, line, `heading "# Skill:" names no skill`)
		valid = false
	default:
		if msg := checkName("skill", name); msg != "" {
			c.add(file, line, "%s", msg)
		}
	}
	s := &Skill{Name: name, Dir: dir, Body: text, Sections: map[string]string{}}
	triggerFound := false
	inFence := false
	for i, l := range doc.preamble {
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			inFence = !inFence
		}
		if inFence {
			continue
		}
		if rest, ok := strings.CutPrefix(trimmed, "Trigger:"); ok {
			s.Trigger = strings.TrimSpace(rest)
			triggerFound = true
			if s.Trigger == "" {
				c.add(file, doc.head+2+i, `"Trigger:" line is empty; say when the skill applies`)
			}
			break
		}
	}
	if !triggerFound {
		c.add(file, 0, `missing a "Trigger: ..." line (after the heading, before the first "## " section) saying when the skill applies`)
	}
	for _, sec := range doc.sections {
		if _, dup := s.Sections[sec.title]; dup {
			c.add(file, sec.line, "duplicate section %q", "## "+sec.title)
			continue
		}
		s.Sections[sec.title] = sec.text()
	}
	if !valid {
		return nil
	}
	return s
}
