package connections

import (
	"strings"
)

// hidden is the compiled "hidden" list of access.json. A plain name ("email") removes that key
// from every object at any depth; a dotted path ("customer.ssn") removes the one field it
// names from the top-level value. Arrays are transparent on both: objects inside arrays are
// stripped too, and a path steps into every element of an array it meets (so "items.secret"
// strips "secret" from each element of "items", and from each element of a top-level array).
// Keys compare case-insensitively: an API that spells "SSN" for "ssn" must not leak it.
type hidden struct {
	anyDepth map[string]bool // lower-case plain names
	paths    [][]string      // lower-case dotted paths
	words    []string        // lower-case last elements, for text bodies
}

func newHidden(list []string) *hidden {
	h := &hidden{anyDepth: map[string]bool{}}
	for _, f := range list {
		f = strings.ToLower(strings.TrimSpace(f))
		if f == "" {
			continue
		}
		parts := strings.Split(f, ".")
		if len(parts) == 1 {
			h.anyDepth[f] = true
		} else {
			h.paths = append(h.paths, parts)
		}
		h.words = append(h.words, parts[len(parts)-1])
	}
	if len(h.words) == 0 {
		return nil
	}
	return h
}

// strip removes the hidden fields from a decoded JSON value, in place.
func (h *hidden) strip(v any) {
	if h == nil {
		return
	}
	if len(h.anyDepth) > 0 {
		h.stripAny(v)
	}
	for _, p := range h.paths {
		stripPath(v, p)
	}
}

func (h *hidden) stripAny(v any) {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			h.stripAny(e)
		}
	case map[string]any:
		for k, e := range x {
			if h.anyDepth[strings.ToLower(k)] {
				delete(x, k)
				continue
			}
			h.stripAny(e)
		}
	}
}

func stripPath(v any, path []string) {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			stripPath(e, path)
		}
	case map[string]any:
		for k, e := range x {
			if !strings.EqualFold(k, path[0]) {
				continue
			}
			if len(path) == 1 {
				delete(x, k)
			} else {
				stripPath(e, path[1:])
			}
		}
	}
}

// mentions reports whether a text body contains a hidden field's name (case-insensitively),
// which may be the field itself in a format the package cannot parse.
func (h *hidden) mentions(text string) (string, bool) {
	if h == nil {
		return "", false
	}
	lower := strings.ToLower(text)
	for _, w := range h.words {
		if strings.Contains(lower, w) {
			return w, true
		}
	}
	return "", false
}
