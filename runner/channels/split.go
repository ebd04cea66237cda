package channels

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// UTF16Len is the length of s in UTF-16 code units, as Telegram counts a message's characters: a
// character outside the Basic Multilingual Plane (most emoji) counts 2. An invalid UTF-8 byte
// counts 1 (JSON encoding turns it into U+FFFD).
func UTF16Len(s string) int {
	n := 0
	for _, r := range s {
		n += runeUnits(r)
	}
	return n
}

func runeUnits(r rune) int {
	if r >= 0x10000 {
		return 2
	}
	return 1
}

// Split cuts text into chunks of at most limit UTF-16 code units whose concatenation is text. It
// cuts after a paragraph break ("\n\n") when one lies in the second half of a chunk, else after a
// line break, else after a space, else between two characters; it never cuts inside a UTF-8
// character (so never inside a surrogate pair) and avoids cutting inside an emoji sequence (a
// zero-width joiner, a variation selector, a skin tone, a flag's pair, a combining mark). Counting
// UTF-16 units is the strictest of the platforms' counts, so a chunk fits Slack's too.
//
// Text of limit units or fewer is one chunk; empty text is no chunk. limit below 2 is taken as 2,
// the width of the widest character.
func Split(text string, limit int) []string {
	limit = max(limit, 2)
	var chunks []string
	for text != "" {
		end, fits := prefixWithin(text, limit)
		if fits {
			return append(chunks, text)
		}
		cut := boundary(text, end)
		chunks = append(chunks, text[:cut])
		text = text[cut:]
	}
	return chunks
}

// prefixWithin returns the byte length of the longest prefix of s within limit UTF-16 units, and
// whether that is all of s.
func prefixWithin(s string, limit int) (int, bool) {
	units := 0
	for i, r := range s {
		units += runeUnits(r)
		if units > limit {
			return i, false
		}
	}
	return len(s), true
}

// boundary chooses where to cut text, which does not fit: end is the byte length of its longest
// prefix that fits. It returns the byte offset just after the best break, always in (0, end].
func boundary(text string, end int) int {
	window, half := text[:end], end/2
	for _, sep := range []string{"\n\n", "\n"} {
		if i := strings.LastIndex(window, sep); i >= 0 && i+len(sep) > half {
			return i + len(sep)
		}
	}
	if i := strings.LastIndexFunc(window, unicode.IsSpace); i >= 0 {
		_, size := utf8.DecodeRuneInString(window[i:])
		if i+size > half {
			return i + size
		}
	}
	return graphemeCut(text, end)
}

// graphemeCut returns end, moved back while the cut would fall inside an emoji sequence or before
// a combining mark; when the whole prefix is one such sequence it cuts at end anyway.
func graphemeCut(text string, end int) int {
	for cut := end; cut > 0; {
		prev, size := utf8.DecodeLastRuneInString(text[:cut])
		next, _ := utf8.DecodeRuneInString(text[cut:])
		if prev != '\u200d' && !extends(next) && !(isFlagHalf(next) && oddFlag(text[:cut])) {
			return cut
		}
		cut -= size
	}
	return end
}

// extends reports whether r belongs to the character before it: a zero-width joiner, a variation
// selector, a skin-tone modifier, a tag (emoji flags of regions), a combining mark.
func extends(r rune) bool {
	switch {
	case r == '\u200d', r >= 0xfe00 && r <= 0xfe0f, r >= 0x1f3fb && r <= 0x1f3ff, r >= 0xe0020 && r <= 0xe007f:
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me)
}

// isFlagHalf reports whether r is a regional indicator, half of a flag.
func isFlagHalf(r rune) bool { return r >= 0x1f1e6 && r <= 0x1f1ff }

// oddFlag reports whether s ends inside a flag: an odd run of regional indicators.
func oddFlag(s string) bool {
	n := 0
	for s != "" {
		r, size := utf8.DecodeLastRuneInString(s)
		if !isFlagHalf(r) {
			break
		}
		n++
		s = s[:len(s)-size]
	}
	return n%2 == 1
}
