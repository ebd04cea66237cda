package connections

import (
	"cmp"
	"net/url"
	"slices"
	"strings"
)

// Redacted replaces every secret value in text that leaves the package.
const Redacted = "[redacted]"

// minFieldSecret is the shortest whitespace-separated part of a secret that is redacted on its
// own ("Bearer sk-..." also hides "sk-..." when a server echoes the token without its scheme).
const minFieldSecret = 8

// redactor replaces the secret values of one request, in the forms they can be echoed in: as
// they are, query-escaped and path-escaped, and each long part of a value with spaces. A nil
// redactor changes nothing.
type redactor struct{ r *strings.Replacer }

func newRedactor(secrets []string) *redactor {
	var forms []string
	add := func(s string) {
		if s == "" {
			return
		}
		forms = append(forms, s, url.QueryEscape(s), url.PathEscape(s))
	}
	for _, s := range secrets {
		add(s)
		if f := strings.Fields(s); len(f) > 1 {
			for _, part := range f {
				if len(part) >= minFieldSecret {
					add(part)
				}
			}
		}
	}
	if len(forms) == 0 {
		return nil
	}
	// Longest first: the replacer tries the old strings in argument order at each position.
	slices.SortFunc(forms, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	forms = slices.Compact(forms)
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, Redacted)
	}
	return &redactor{r: strings.NewReplacer(pairs...)}
}

// str returns s with every secret replaced.
func (r *redactor) str(s string) string {
	if r == nil {
		return s
	}
	return r.r.Replace(s)
}

// tree replaces secrets in every string and object key of a decoded JSON value, in place
// where it can, and returns the value.
func (r *redactor) tree(v any) any {
	if r == nil {
		return v
	}
	switch x := v.(type) {
	case string:
		return r.str(x)
	case []any:
		for i := range x {
			x[i] = r.tree(x[i])
		}
	case map[string]any:
		for k, e := range x {
			if rk := r.str(k); rk != k {
				delete(x, k)
				x[rk] = r.tree(e)
				continue
			}
			x[k] = r.tree(e)
		}
	}
	return v
}

// redactedError is an error whose text has the request's secrets removed; errors.Is and As
// still see the cause.
type redactedError struct {
	msg   string
	cause error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.cause }

// err returns err with its text redacted (err itself when nothing changes or r is nil).
func (r *redactor) err(err error) error {
	if r == nil || err == nil {
		return err
	}
	msg := err.Error()
	if red := r.str(msg); red != msg {
		return &redactedError{msg: red, cause: err}
	}
	return err
}
