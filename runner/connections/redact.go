package connections

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Redacted replaces every secret value in text that leaves the package.
const Redacted = "[redacted]"

// MinCredentialLen is the fewest characters the credential of an auth value may have: the
// value itself, or its last space-separated part ("Bearer <token>" is checked on <token>).
// A shorter one is refused when a request resolves it (ShortCredentialError): a secret of a
// few characters cannot be removed from results without rewriting ordinary words that match
// it, which would both corrupt the results and show where the secret was. A value with a
// {{context.KEY}} template is not checked (part of it is the chat's own data), and whatever is
// shorter than this is never redacted. Parts of a value with spaces that are at least this
// long are also redacted on their own.
const MinCredentialLen = 8

// ShortCredentialError is the error for an auth value whose credential has fewer than
// MinCredentialLen characters. It names the field and the env: reference, never the value.
type ShortCredentialError struct {
	Field string // "auth.headers.Authorization"
	Ref   string // "env:STATUS_TOKEN"
}

func (e *ShortCredentialError) Error() string {
	return fmt.Sprintf("%s: the value of %s is too short to keep out of results (its credential has fewer than %d characters): set a credential of at least %d characters",
		e.Field, e.Ref, MinCredentialLen, MinCredentialLen)
}

// checkCredentialLen returns a *ShortCredentialError when v's credential is too short.
func checkCredentialLen(field, ref, v string) error {
	cred := v
	if f := strings.Fields(v); len(f) > 0 {
		cred = f[len(f)-1]
	}
	if utf8.RuneCountInString(cred) < MinCredentialLen {
		return &ShortCredentialError{Field: field, Ref: ref}
	}
	return nil
}

// redactor replaces the secret values of one request, in the forms they can be echoed in: as
// they are, query-escaped and path-escaped, and each long part of a value with spaces; a value
// or part shorter than MinCredentialLen is not redacted (it would rewrite ordinary words). It
// replaces whole tokens only: an occurrence whose neighbour continues a run of letters or
// digits the secret starts or ends with is part of another word and is left alone, so a
// secret "abcd1234" redacts "key abcd1234." and "x=abcd1234&y" but not "abcd12345". A nil
// redactor changes nothing.
type redactor struct {
	forms []string // longest first
}

func newRedactor(secrets []string) *redactor {
	var forms []string
	add := func(s string) {
		if utf8.RuneCountInString(s) < MinCredentialLen {
			return // refused when it is the author's secret (checkCredentialLen); else the chat's own data
		}
		forms = append(forms, s, url.QueryEscape(s), url.PathEscape(s))
	}
	for _, s := range secrets {
		add(s)
		if f := strings.Fields(s); len(f) > 1 {
			for _, part := range f {
				if utf8.RuneCountInString(part) >= MinCredentialLen {
					add(part)
				}
			}
		}
	}
	if len(forms) == 0 {
		return nil
	}
	// Longest first: at one position the longest form wins.
	slices.SortFunc(forms, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) })
	return &redactor{forms: slices.Compact(forms)}
}

// wordRune reports whether r continues a word: a letter or a digit.
func wordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// wholeAt reports whether the occurrence of form at s[i:] is a whole token: the rune before
// it does not continue a word form starts with, and the rune after it does not continue a
// word form ends with (the edges of s count as boundaries).
func wholeAt(s, form string, i int) bool {
	if i > 0 {
		first, _ := utf8.DecodeRuneInString(form)
		before, _ := utf8.DecodeLastRuneInString(s[:i])
		if wordRune(first) && wordRune(before) {
			return false
		}
	}
	if end := i + len(form); end < len(s) {
		last, _ := utf8.DecodeLastRuneInString(form)
		after, _ := utf8.DecodeRuneInString(s[end:])
		if wordRune(last) && wordRune(after) {
			return false
		}
	}
	return true
}

// indexWhole returns the first whole-token occurrence of form in s at or after from, or -1.
func indexWhole(s, form string, from int) int {
	for from <= len(s)-len(form) {
		j := strings.Index(s[from:], form)
		if j < 0 {
			return -1
		}
		j += from
		if wholeAt(s, form, j) {
			return j
		}
		_, size := utf8.DecodeRuneInString(s[j:])
		from = j + size
	}
	return -1
}

// str returns s with every whole-token occurrence of a secret replaced by Redacted.
func (r *redactor) str(s string) string {
	if r == nil {
		return s
	}
	if !slices.ContainsFunc(r.forms, func(f string) bool { return indexWhole(s, f, 0) >= 0 }) {
		return s // the common case: nothing to redact, nothing allocated
	}
	// next[k] is the next whole occurrence of forms[k] at or after the scan position, -1 when
	// there is none, -2 before the first search.
	next := make([]int, len(r.forms))
	for k := range next {
		next[k] = -2
	}
	var b strings.Builder
	b.Grow(len(s))
	pos := 0
	for {
		best, bestLen := -1, 0
		for k, f := range r.forms {
			if next[k] == -2 || next[k] >= 0 && next[k] < pos {
				next[k] = indexWhole(s, f, pos)
			}
			if j := next[k]; j >= 0 && (best < 0 || j < best) { // forms are longest first: a tie keeps the longer
				best, bestLen = j, len(f)
			}
		}
		if best < 0 {
			break
		}
		b.WriteString(s[pos:best])
		b.WriteString(Redacted)
		pos = best + bestLen
	}
	b.WriteString(s[pos:])
	return b.String()
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
