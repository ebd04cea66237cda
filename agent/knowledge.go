package agent

import (
	"strconv"
	"strings"
)

// parseKnowledge reads svc/knowledge/<name>.md: front matter with a description, then the body.
func parseKnowledge(file, name string, data []byte, c *collector) *Knowledge {
	k := &Knowledge{Name: name}
	text, ok := markdownText(file, data, c)
	if !ok {
		return k
	}
	fm, body, problems := parseFrontMatter(text)
	for _, p := range problems {
		c.add(file, p.line, "%s", p.message)
	}
	k.Body = body
	if d, ok := fm["description"]; ok {
		k.Description = d
	}
	if strings.TrimSpace(k.Description) == "" && len(problems) == 0 {
		c.add(file, 1, "missing front matter field %q", "description")
	}
	return k
}

// isFrontMatterField reports whether key is allowed in a knowledge document's front matter.
func isFrontMatterField(key string) bool { return key == "description" }

// parseFrontMatter splits "---\nkey: value\n---\nbody" into its fields and body. Values are single-line
// YAML scalars: plain, "double-quoted" or 'single-quoted'. Without front matter, body is the whole text.
func parseFrontMatter(text string) (fields map[string]string, body string, problems []lineIssue) {
	lines := strings.Split(text, "\n")
	if strings.TrimRight(lines[0], " \t") != "---" {
		return nil, text, []lineIssue{{line: 1, message: `missing front matter: the file must start with "---", a "description: ..." line and "---"`}}
	}
	end := -1
	for i := 1; i < len(lines); i++ {
		if strings.TrimRight(lines[i], " \t") == "---" {
			end = i
			break
		}
	}
	if end < 0 {
		return nil, text, []lineIssue{{line: 1, message: `front matter is not closed by a "---" line`}}
	}
	fields = map[string]string{}
	for i := 1; i < end; i++ {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		key, value, found := strings.Cut(line, ":")
		key = strings.TrimSpace(key)
		if !found || key == "" || strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
			problems = append(problems, lineIssue{line: i + 1, message: "front matter line must be \"key: value\", got " + strconv.Quote(quoteLine(line))})
			continue
		}
		if !isFrontMatterField(key) {
			problems = append(problems, lineIssue{line: i + 1, message: "unknown front matter field " + strconv.Quote(key)})
			continue
		}
		if _, dup := fields[key]; dup {
			problems = append(problems, lineIssue{line: i + 1, message: "duplicate front matter field " + strconv.Quote(key)})
			continue
		}
		v, msg := yamlScalar(strings.TrimSpace(value))
		if msg != "" {
			problems = append(problems, lineIssue{line: i + 1, message: "front matter field " + strconv.Quote(key) + ": " + msg})
			continue
		}
		fields[key] = v
	}
	return fields, strings.Join(lines[end+1:], "\n"), problems
}

// yamlScalar decodes a one-line YAML scalar; msg explains why it cannot.
func yamlScalar(v string) (value, msg string) {
	switch {
	case v == "|" || v == ">" || strings.HasPrefix(v, "|") && len(v) <= 3 || strings.HasPrefix(v, ">") && len(v) <= 3:
		return "", "must be on one line"
	case strings.HasPrefix(v, `"`):
		s, err := strconv.Unquote(v)
		if err != nil {
			return "", "invalid double-quoted string"
		}
		return s, ""
	case strings.HasPrefix(v, "'"):
		if len(v) < 2 || !strings.HasSuffix(v, "'") {
			return "", "invalid single-quoted string"
		}
		inner := v[1 : len(v)-1]
		if strings.Contains(strings.ReplaceAll(inner, "''", ""), "'") {
			return "", "invalid single-quoted string"
		}
		return strings.ReplaceAll(inner, "''", "'"), ""
	}
	return v, ""
}
