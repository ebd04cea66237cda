package agent

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Guardrails is the "guardrails" entry of svc.json.
type Guardrails struct {
	PreInput *PreInput `json:"preInput,omitempty"`
}

// PreInput checks each user message before anything of it is stored or reaches the model: a
// message that a Block pattern matches is refused; what a Redact pattern matches is replaced.
// Patterns are RE2 regular expressions (Go's regexp syntax); Redact also takes the names of
// the built-in patterns (RedactPatterns).
type PreInput struct {
	Block  []string `json:"block,omitempty"`
	Redact []string `json:"redact,omitempty"`
}

// RedactPatterns are the built-in patterns a Redact entry may name, with the text that replaces
// a match. A card number must also pass the Luhn check, so that order numbers stay.
var RedactPatterns = map[string]struct{ Pattern, Replacement string }{
	"email": {`[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}`, "[redacted email]"},
	"card":  {`\b(?:\d[ \-]?){12,18}\d\b`, "[redacted card]"},
}

// InputGuard is a compiled PreInput. It is safe for concurrent use.
type InputGuard struct {
	block  []*regexp.Regexp
	redact []redaction
}

type redaction struct {
	re          *regexp.Regexp
	replacement string
	luhn        bool
}

// Compile compiles p; a nil or empty p gives nil, which checks nothing. Errors name the field.
func (p *PreInput) Compile() (*InputGuard, error) {
	if p == nil || len(p.Block)+len(p.Redact) == 0 {
		return nil, nil
	}
	g := &InputGuard{}
	for i, pat := range p.Block {
		re, err := compileGuard(pat)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", "guardrails.preInput.block["+strconv.Itoa(i)+"]", err)
		}
		g.block = append(g.block, re)
	}
	for i, pat := range p.Redact {
		if named, ok := RedactPatterns[pat]; ok {
			g.redact = append(g.redact, redaction{re: regexp.MustCompile(named.Pattern), replacement: named.Replacement, luhn: pat == "card"})
			continue
		}
		re, err := compileGuard(pat)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w (or one of the names email, card)", "guardrails.preInput.redact["+strconv.Itoa(i)+"]", err)
		}
		g.redact = append(g.redact, redaction{re: re, replacement: "[redacted]"})
	}
	return g, nil
}

func compileGuard(pat string) (*regexp.Regexp, error) {
	if pat == "" {
		return nil, fmt.Errorf("empty pattern")
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return nil, fmt.Errorf("invalid regular expression %q: %v", pat, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	return re, nil
}

// Verdict is what an InputGuard made of a message.
type Verdict struct {
	// Blocked says block pattern Rule (counted from 0) matched; nothing else is done then.
	Blocked bool
	Rule    int
	// Text is the message with every redact match replaced; Redacted says whether any was.
	Text     string
	Redacted bool
}

// Check applies the guard to text. A nil guard passes text as it is.
func (g *InputGuard) Check(text string) Verdict {
	if g == nil {
		return Verdict{Text: text}
	}
	for i, re := range g.block {
		if re.MatchString(text) {
			return Verdict{Blocked: true, Rule: i}
		}
	}
	out := text
	for _, r := range g.redact {
		out = r.re.ReplaceAllStringFunc(out, func(m string) string {
			if r.luhn && !luhn(m) {
				return m
			}
			return r.replacement
		})
	}
	return Verdict{Text: out, Redacted: out != text}
}

// luhn reports whether the digits of s pass the Luhn checksum of card numbers.
func luhn(s string) bool {
	sum, n := 0, 0
	for i := len(s) - 1; i >= 0; i-- {
		c := s[i]
		if c < '0' || c > '9' {
			continue
		}
		d := int(c - '0')
		if n%2 == 1 {
			if d *= 2; d > 9 {
				d -= 9
			}
		}
		sum += d
		n++
	}
	return n >= 13 && sum%10 == 0
}
