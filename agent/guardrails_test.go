package agent

import "testing"

func TestInputGuard(t *testing.T) {
	g, err := (&PreInput{Block: []string{`(?i)\bdrop table\b`}, Redact: []string{"email", "card", `ACCT-\d{6}`}}).Compile()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in, out           string
		redacted, blocked bool
	}{
		{in: "hello", out: "hello"},
		{in: "please DROP TABLE users", blocked: true},
		{in: "mail me at jo.doe+x@example.co.uk today", out: "mail me at [redacted email] today", redacted: true},
		{in: "card 4111 1111 1111 1111 ok", out: "card [redacted card] ok", redacted: true},
		{in: "card 4111-1111-1111-1111", out: "card [redacted card]", redacted: true},
		{in: "order 1234567890123 is not a card", out: "order 1234567890123 is not a card"}, // fails Luhn
		{in: "account ACCT-123456", out: "account [redacted]", redacted: true},
	} {
		v := g.Check(c.in)
		if v.Blocked != c.blocked || (!v.Blocked && (v.Text != c.out || v.Redacted != c.redacted)) {
			t.Errorf("Check(%q) = %+v; want %q, redacted %v, blocked %v", c.in, v, c.out, c.redacted, c.blocked)
		}
	}
	var none *InputGuard
	if v := none.Check("x@y.zz"); v != (Verdict{Text: "x@y.zz"}) {
		t.Errorf("a nil guard changed the text: %+v", v)
	}
	if g, err := (&PreInput{}).Compile(); g != nil || err != nil {
		t.Errorf("an empty PreInput compiled to %v, %v", g, err)
	}
	if _, err := (&PreInput{Block: []string{"("}}).Compile(); err == nil || err.Error() != `field "guardrails.preInput.block[0]": invalid regular expression "(": missing closing ): `+"`(`" {
		t.Errorf("bad pattern: %v", err)
	}
}
