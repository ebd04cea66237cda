package agent

import (
	"strings"
	"unicode/utf8"
)

// markdownText checks that a text file is UTF-8 and returns it without a byte order mark and with
// "\n" line ends.
func markdownText(file string, data []byte, c *collector) (string, bool) {
	if !utf8.Valid(data) {
		c.add(file, 0, "not valid UTF-8")
		return "", false
	}
	text := strings.TrimPrefix(string(data), "\ufeff")
	return strings.ReplaceAll(text, "\r\n", "\n"), true
}

// mdSection is one "## <title>" section of a markdown file.
type mdSection struct {
	title string
	line  int      // line of the heading
	body  []string // the lines after the heading up to the next section
	first int      // line number of body[0]
}

// text returns the section body, trimmed.
func (s mdSection) text() string { return strings.TrimSpace(strings.Join(s.body, "\n")) }

// mdDoc is a markdown file cut into its lines, its first heading and its "## " sections.
type mdDoc struct {
	lines    []string
	head     int      // index of the first non-empty line, -1 when the file is blank
	preamble []string // the lines between the head line and the first section; preamble[i] is line head+2+i
	sections []mdSection
}

// splitMarkdown cuts text into lines and "## " sections, ignoring headings inside code fences.
func splitMarkdown(text string) mdDoc {
	d := mdDoc{lines: strings.Split(text, "\n"), head: -1}
	inFence := false
	for i, line := range d.lines {
		trimmed := strings.TrimSpace(line)
		if d.head < 0 {
			if trimmed != "" {
				d.head = i
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			inFence = !inFence
		}
		if !inFence && strings.HasPrefix(line, "## ") {
			d.sections = append(d.sections, mdSection{title: strings.TrimSpace(line[3:]), line: i + 1, first: i + 2})
			continue
		}
		if n := len(d.sections); n > 0 {
			d.sections[n-1].body = append(d.sections[n-1].body, line)
		} else {
			d.preamble = append(d.preamble, line)
		}
	}
	return d
}

// heading returns the text after prefix on the first non-empty line, trimmed, and that line's number;
// ok is false when the line does not start with prefix.
func (d mdDoc) heading(prefix string) (text string, line int, ok bool) {
	if d.head < 0 {
		return "", 1, false
	}
	rest, found := strings.CutPrefix(strings.TrimSpace(d.lines[d.head]), prefix)
	return strings.TrimSpace(rest), d.head + 1, found
}

// quoteLine shortens a line for a problem message.
func quoteLine(s string) string {
	const maxLen = 60
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) > maxLen {
		s = string([]rune(s)[:maxLen]) + "..."
	}
	return s
}
