package connections

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The redactor replaces each secret as it is, escaped, and each long part of a value with
// spaces, and only where it stands as a whole token: data that merely contains the secret
// inside a longer word is not rewritten.
func TestRedactor(t *testing.T) {
	r := newRedactor([]string{"Bearer abc/def+ghi", "", "tok_4f9a2c", "-9a8b7c6d-"})
	for _, tt := range []struct{ in, want string }{
		{"auth Bearer abc/def+ghi", "auth " + Redacted},
		{"token abc/def+ghi alone", "token " + Redacted + " alone"},
		{"q=abc%2Fdef%2Bghi", "q=" + Redacted},
		{"p/abc%2Fdef+ghi", "p/" + Redacted},
		{"Bearer stays, tok_4f9a2c does not", "Bearer stays, " + Redacted + " does not"},
		// Whole tokens: punctuation, quotes, '_', '-', '=' and the ends of the text delimit.
		{"tok_4f9a2c", Redacted},
		{`"tok_4f9a2c".`, `"` + Redacted + `".`},
		{"key=tok_4f9a2c&x=1", "key=" + Redacted + "&x=1"},
		{"tok_4f9a2c_expired", Redacted + "_expired"},
		{"tok_4f9a2c-tok_4f9a2c", Redacted + "-" + Redacted},
		{"(tok_4f9a2c)", "(" + Redacted + ")"},
		// Inside a longer word: another value, left whole.
		{"tok_4f9a2c0", "tok_4f9a2c0"},
		{"xtok_4f9a2c", "xtok_4f9a2c"},
		{"étok_4f9a2c", "étok_4f9a2c"},
		{"tok_4f9a2c9 and tok_4f9a2c", "tok_4f9a2c9 and " + Redacted},
		// A secret that starts or ends with a non-word character has no boundary to check there.
		{"x-9a8b7c6d-y", "x" + Redacted + "y"},
		{"xabc/def+ghiy", "xabc/def+ghiy"},
		{"nothing here", "nothing here"},
	} {
		if got := r.str(tt.in); got != tt.want {
			t.Errorf("str(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	tree := r.tree(map[string]any{"abc/def+ghi": []any{"x tok_4f9a2c", "tok_4f9a2cd"}})
	if d := cmp.Diff(map[string]any{Redacted: []any{"x " + Redacted, "tok_4f9a2cd"}}, tree); d != "" {
		t.Errorf("tree (-want +got):\n%s", d)
	}
	if newRedactor(nil) != nil || newRedactor([]string{""}) != nil {
		t.Error("a redactor without secrets")
	}
	err := errors.New("401 for tok_4f9a2c")
	if got := r.err(err); got.Error() != "401 for "+Redacted || !errors.Is(got, err) {
		t.Errorf("err = %v (Is cause: %v)", got, errors.Is(got, err))
	}
}

// Overlapping forms: the longest form at the earliest position wins, and a form found inside
// an earlier replacement is searched for again after it.
func TestRedactorOverlaps(t *testing.T) {
	r := newRedactor([]string{"aaaa-bbbb cccccccc", "bbbb-cccc"})
	for in, want := range map[string]string{
		"aaaa-bbbb cccccccc":             Redacted,
		"cccccccc bbbb-cccc":             Redacted + " " + Redacted,
		"aaaa-bbbb-cccc":                 Redacted + "-cccc", // the part aaaa-bbbb first; bbbb-cccc then overlaps it
		"bbbb-ccccc cccccccc":            "bbbb-ccccc " + Redacted,
		strings.Repeat("c", 20):          strings.Repeat("c", 20),
		"x aaaa-bbbb cccccccc bbbb-cccc": "x " + Redacted + " " + Redacted,
	} {
		if got := r.str(in); got != want {
			t.Errorf("str(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheckCredentialLen(t *testing.T) {
	for v, short := range map[string]bool{
		"x": true, "1234567": true, "12345678": false, "Bearer x": true, "Bearer 1234567": true,
		"Bearer 12345678": false, "ééééééé": true, "éééééééé": false, "": true, "   ": true,
	} {
		err := checkCredentialLen("auth.headers.Authorization", "env:TOKEN", v)
		var e *ShortCredentialError
		if got := errors.As(err, &e); got != short {
			t.Errorf("checkCredentialLen(%q) = %v, want short %v", v, err, short)
			continue
		}
		if short && (!strings.Contains(err.Error(), "auth.headers.Authorization") || !strings.Contains(err.Error(), "env:TOKEN")) {
			t.Errorf("message %q should name the field and the variable", err)
		}
	}
}

// FuzzRedactor: whatever the text, no whole-token occurrence of a secret's form is left, and a
// text without one comes back unchanged.
func FuzzRedactor(f *testing.F) {
	f.Add("tok_4f9a2c77", "x tok_4f9a2c77 y tok_4f9a2c770")
	f.Add("Bearer abcd/1234+efgh", "abcd%2F1234%2Befgh abcd/1234+efgh.")
	f.Add("aaaaaaaa", "aaaaaaaaaaaaaaaaa aaaaaaaa")
	f.Fuzz(func(t *testing.T, secret, text string) {
		r := newRedactor([]string{secret})
		got := r.str(text)
		if r == nil {
			if got != text {
				t.Fatalf("a nil redactor changed %q", text)
			}
			return
		}
		for _, form := range r.forms {
			if indexWhole(got, form, 0) >= 0 && !strings.Contains(form, Redacted) && !strings.Contains(Redacted, form) {
				t.Fatalf("str(%q) = %q still holds %q", text, got, form)
			}
		}
		if !strings.Contains(got, Redacted) && got != text {
			t.Fatalf("str(%q) = %q changed the text without redacting", text, got)
		}
	})
}
