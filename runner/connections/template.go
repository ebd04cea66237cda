package connections

import (
	"fmt"
	"strings"
)

// MissingContextError is the error for a {{context.KEY}} template whose KEY the session's
// context does not have.
type MissingContextError struct {
	Key   string
	Field string // where the template is: "path", "query.page", "auth.headers.X-Tenant"
}

func (e *MissingContextError) Error() string {
	return fmt.Sprintf("%s: {{context.%s}} has no value: the chat's context has no key %q", e.Field, e.Key, e.Key)
}

// contextKey returns KEY for the inside of a template, "context.KEY" with optional spaces
// around it; KEY is letters, digits, '_', '-' and '.' (the keys loop.Fill fills in prompts).
func contextKey(inner string) (string, bool) {
	k, ok := strings.CutPrefix(strings.TrimSpace(inner), "context.")
	if !ok || k == "" {
		return "", false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c == '-' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return "", false
		}
	}
	return k, true
}

// fill replaces each {{context.KEY}} of text with escape(values[KEY]); other {{...}} text is
// left as it is. A KEY missing from values is a *MissingContextError naming field.
func fill(field, text string, values map[string]string, escape func(string) string) (string, error) {
	i := strings.Index(text, "{{")
	if i < 0 {
		return text, nil
	}
	var b strings.Builder
	b.Grow(len(text))
	for i >= 0 {
		end := strings.Index(text[i+2:], "}}")
		if end < 0 {
			break
		}
		key, ok := contextKey(text[i+2 : i+2+end])
		if !ok {
			b.WriteString(text[:i+2])
			text = text[i+2:]
			i = strings.Index(text, "{{")
			continue
		}
		v, found := values[key]
		if !found {
			return "", &MissingContextError{Key: key, Field: field}
		}
		b.WriteString(text[:i])
		if escape != nil {
			v = escape(v)
		}
		b.WriteString(v)
		text = text[i+2+end+2:]
		i = strings.Index(text, "{{")
	}
	b.WriteString(text)
	return b.String(), nil
}

// hasContextTemplate reports whether text holds a {{context.KEY}} template that fill fills.
func hasContextTemplate(text string) bool {
	for {
		i := strings.Index(text, "{{")
		if i < 0 {
			return false
		}
		end := strings.Index(text[i+2:], "}}")
		if end < 0 {
			return false
		}
		if _, ok := contextKey(text[i+2 : i+2+end]); ok {
			return true
		}
		text = text[i+2:]
	}
}
