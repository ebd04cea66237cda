package sse

import (
	"encoding/json"
	"testing"
	"time"
)

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	cases := []string{
		"", "plain", `quote " and \ backslash`, "new\nline\ttab\rcr", "\x00\x01\x1f\x7f",
		"é ü 中文 😀", "bad \xff utf8 \xc3", "line\u2028sep\u2029", "<html>&amp;",
	}
	for _, s := range cases {
		got := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("AppendString(%q) = %s: not JSON: %v", s, got, err)
		}
		want, _ := json.Marshal(s) // reference decoding of the same string
		var wantBack string
		if err := json.Unmarshal(want, &wantBack); err != nil {
			t.Fatal(err)
		}
		if back != wantBack {
			t.Errorf("AppendString(%q) decodes to %q, want %q", s, back, wantBack)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\xff", "\u2028", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("AppendString(%q) = %s: not JSON: %v", s, got, err)
		}
		want, _ := json.Marshal(s)
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Fatalf("AppendString(%q) decodes to %q, want %q", s, back, wantBack)
		}
	})
}

func TestAppendTimestamp(t *testing.T) {
	ts := time.Date(2026, 3, 4, 5, 6, 7, 8_000_000, time.FixedZone("x", 3600))
	if got, want := string(AppendTimestamp(nil, ts)), "2026-03-04T04:06:07.008Z"; got != want {
		t.Errorf("AppendTimestamp = %s, want %s", got, want)
	}
}
