package agent

import (
	"slices"
	"strings"
)

// parseEval reads evals/<name>.md: "# Eval: <title>", a description, "## Setup" with a
// "Context: k=v, ..." line, "## Query" with the quoted user message and "## Assertions" bullets.
func parseEval(file, name string, data []byte, c *collector) *Eval {
	e := &Eval{Name: name}
	text, ok := markdownText(file, data, c)
	if !ok {
		return e
	}
	doc := splitMarkdown(text)
	title, line, found := doc.heading("# Eval:")
	switch {
	case doc.head < 0:
		c.add(file, 1, `empty file: an eval starts with the heading "# Eval: <title>"`)
		return e
	case !found:
		c.add(file, line, `first line must be the heading "# Eval: <title>", got %q`, quoteLine(doc.lines[doc.head]))
	case title == "":
		c.add(file, line, `heading "# Eval:" has no title`)
	}
	e.Title = title
	e.Description = strings.TrimSpace(strings.Join(doc.preamble, "\n"))
	seen := map[string]bool{}
	for _, sec := range doc.sections {
		key := strings.ToLower(sec.title)
		switch key {
		case "setup", "query", "assertions":
		default:
			continue // other sections are notes for people
		}
		if seen[key] {
			c.add(file, sec.line, "duplicate section %q", "## "+sec.title)
			continue
		}
		seen[key] = true
		switch key {
		case "setup":
			e.Context = parseEvalSetup(file, sec, c)
			e.AllowWrites = parseAllowWrites(file, sec, c)
		case "query":
			q := sec.text()
			if len(q) < 2 || !strings.HasPrefix(q, `"`) || !strings.HasSuffix(q, `"`) {
				c.add(file, sec.line, `"## Query" must hold the user message in double quotes, e.g. "Where is my order?"`)
				continue
			}
			e.Query = q[1 : len(q)-1]
			if strings.TrimSpace(e.Query) == "" {
				c.add(file, sec.line, `"## Query" holds an empty message`)
			}
		case "assertions":
			e.Assertions = parseAssertions(file, sec, c)
		}
	}
	if !seen["query"] {
		c.add(file, 0, `missing section "## Query" with the quoted user message`)
	}
	if !seen["assertions"] {
		c.add(file, 0, `missing section "## Assertions" with a bullet list`)
	}
	return e
}

// parseEvalSetup reads the "Context: k=v, k2=v2" line of "## Setup"; other lines are free text.
func parseEvalSetup(file string, sec mdSection, c *collector) map[string]string {
	var ctx map[string]string
	for i, l := range sec.body {
		rest, ok := strings.CutPrefix(strings.TrimSpace(l), "Context:")
		if !ok {
			continue
		}
		line := sec.first + i
		if ctx != nil {
			c.add(file, line, `more than one "Context:" line`)
			continue
		}
		ctx = map[string]string{}
		rest = strings.TrimSpace(rest)
		if rest == "" {
			continue
		}
		for pair := range strings.SplitSeq(rest, ",") {
			k, v, found := strings.Cut(pair, "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			switch {
			case !found || k == "":
				c.add(file, line, `"Context:" entries must be key=value, got %q`, strings.TrimSpace(pair))
			case hasKey(ctx, k):
				c.add(file, line, `"Context:" sets %q twice`, k)
			default:
				ctx[k] = v
			}
		}
	}
	return ctx
}

// parseAllowWrites reads the "Allow writes: conn, conn2" line of "## Setup" ("*": every
// connection); the names are checked against the agent's connections once they are loaded.
func parseAllowWrites(file string, sec mdSection, c *collector) []string {
	var out []string
	seen := false
	for i, l := range sec.body {
		rest, ok := cutPrefixFold(strings.TrimSpace(l), "Allow writes:")
		if !ok {
			continue
		}
		line := sec.first + i
		if seen {
			c.add(file, line, `more than one "Allow writes:" line`)
			continue
		}
		seen = true
		for name := range strings.SplitSeq(rest, ",") {
			name = strings.TrimSpace(name)
			switch {
			case name == "":
				c.add(file, line, `"Allow writes:" lists an empty name: give connection names separated by commas, or *`)
			case slices.Contains(out, name):
				c.add(file, line, `"Allow writes:" lists %q twice`, name)
			default:
				out = append(out, name)
			}
		}
	}
	return out
}

// cutPrefixFold is strings.CutPrefix ignoring the case of prefix.
func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return s, false
	}
	return s[len(prefix):], true
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// parseAssertions reads the bullets of "## Assertions"; indented lines continue the bullet above.
func parseAssertions(file string, sec mdSection, c *collector) []Assertion {
	var out []Assertion
	for i, l := range sec.body {
		trimmed := strings.TrimSpace(l)
		if trimmed == "" {
			continue
		}
		rest, isBullet := strings.CutPrefix(trimmed, "- ")
		if !isBullet {
			rest, isBullet = strings.CutPrefix(trimmed, "* ")
		}
		if trimmed == "-" || trimmed == "*" {
			rest, isBullet = "", true
		}
		switch {
		case isBullet:
			text := strings.TrimSpace(rest)
			if text == "" {
				c.add(file, sec.first+i, "empty assertion")
				continue
			}
			out = append(out, Assertion{Text: text})
		case len(out) > 0 && (strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t")):
			out[len(out)-1].Text += " " + trimmed
		default:
			c.add(file, sec.first+i, `assertions are bullets ("- Should ..."), got %q`, quoteLine(l))
		}
	}
	for i := range out {
		out[i].Negative = isNegative(out[i].Text)
	}
	if len(out) == 0 {
		c.add(file, sec.line, `"## Assertions" has no bullet`)
	}
	return out
}

// isNegative reports whether an assertion says what must not happen ("Should NOT ...").
func isNegative(text string) bool {
	lower := strings.ToLower(text)
	return lower == "should not" || strings.HasPrefix(lower, "should not ")
}
