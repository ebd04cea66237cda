package attachments_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"svc/runner/attachments"
)

func TestRTFText(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"plain", `{\rtf1\ansi Hello\par World}`, "Hello\nWorld"},
		{"euro by \\u with fallback", `{\rtf1\ansi Price: 5\u8364? net}`, "Price: 5€ net"},
		{"\\uc2 skips two fallback characters", `{\rtf1\ansi\uc2 a\u8364\'80\'80b}`, "a€b"},
		{"\\uc0 skips none", `{\rtf1{\uc0 a\u233 b}}`, "aéb"},
		{"\\uc restored after a group", `{\rtf1\uc1{\uc3 x}\u233?y}`, "xéy"},
		{"negative \\u", `{\rtf1 \u-4064?}`, "\uF020"},
		{"surrogate pair", `{\rtf1\uc1 \u-10179?\u-8704?}`, "😀"},
		{"\\'e9 in cp1252", `{\rtf1\ansi\ansicpg1252 caf\'e9}`, "café"},
		{"\\'80 is the euro in cp1252", `{\rtf1\ansi\ansicpg1252 \'80}`, "€"},
		{"cp1251", `{\rtf1\ansi\ansicpg1251 \'cf\'f0\'e8\'e2\'e5\'f2}`, "Привет"},
		{"shift-jis pair", `{\rtf1\ansi\ansicpg932 \'82\'a0}`, "あ"},
		{"nested groups", `{\rtf1 a{\b b{\i c}d}e}`, "abcde"},
		{"tables and tab", `{\rtf1 x\tab y\par \trowd a\cell b\cell\row c\cell d\cell\row}`, "x\ty\na | b\nc | d"},
		{"destinations skipped", `{\rtf1{\fonttbl{\f0 Arial;}}{\colortbl;\red0\green0\blue0;}{\stylesheet{\s0 Normal;}}{\info{\title T}{\author A}}` +
			`{\*\generator Writer;}{\*\unknowndest secret}{\pict\pngblip 89504e47}Body}`, "Body"},
		{"field result kept, instruction skipped", `{\rtf1{\field{\*\fldinst HYPERLINK "x"}{\fldrslt link}}}`, "link"},
		{"escapes", `{\rtf1 a\{b\}c\\d\~e\_f\-g}`, "a{b}c\\d\u00a0e-fg"},
		{"binary skipped", "{\\rtf1 a{\\*\\blob\\bin4 \x00}{\\}b}", "ab"},
		{"quotes and dashes", `{\rtf1\lquote x\rquote  \emdash\endash\bullet}`, "‘x’ —–•"},
		{"unbalanced close", `{\rtf1 a}}} b`, "a b"},
		{"truncated", `{\rtf1 abc\'`, "abc"},
		{"leading BOM and space", "\xEF\xBB\xBF \r\n{\\rtf1 ok}", "ok"},
		{"crlf ignored", "{\\rtf1 a\r\nb\\\r\nc}", "ab\nc"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := attachments.RTFText([]byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.want, strings.TrimSpace(got)); d != "" {
				t.Errorf("RTFText(%q) (-want +got):\n%s", c.in, d)
			}
		})
	}
}

func TestConvertRTF(t *testing.T) {
	res, err := attachments.Convert("memo.rtf", "text/rtf", []byte(`{\rtf1\ansi\ansicpg1252{\fonttbl{\f0 Times;}}\f0 Dear caf\'e9,\par pay 5\u8364?.\par}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "Dear café,\npay 5€." || len(res.Images) != 0 {
		t.Errorf("text %q images %d", res.Text, len(res.Images))
	}
}

func FuzzRTF(f *testing.F) {
	for _, s := range []string{
		`{\rtf1\ansi Hello\par World}`,
		`{\rtf1\ansi\ansicpg1252 caf\'e9 5\u8364? {\*\x y}}`,
		`{\rtf1\uc2\u-10179??\u-8704??{\pict\bin3 abc}}`,
		`{\rtf1\ansicpg932 \'82\'a0\'82}`,
		`{\rtf1 \trowd a\cell\row\'`,
		`{\rtf1\bin99999999999999999999 x}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := attachments.RTFText(data)
		if err != nil {
			return
		}
		if !utf8.ValidString(out) {
			t.Errorf("RTFText(%q) = %q: not UTF-8", data, out)
		}
		if len(out) > 8*len(data)+16 {
			t.Errorf("RTFText(%q): %d bytes out of %d", data, len(out), len(data))
		}
	})
}

func BenchmarkRTFText(b *testing.B) {
	var doc strings.Builder
	doc.WriteString(`{\rtf1\ansi\ansicpg1252{\fonttbl{\f0 Arial;}}`)
	for range 5000 {
		doc.WriteString(`{\b caf\'e9} costs 5\u8364? \trowd a\cell b\cell\row\par` + "\n")
	}
	doc.WriteString("}")
	data := []byte(doc.String())
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := attachments.RTFText(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRTFTextDeepGroups(b *testing.B) {
	data := []byte(`{\rtf1` + strings.Repeat(`{\u233?\row`, 200_000) + strings.Repeat("}", 200_000))
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := attachments.RTFText(data); err != nil {
			b.Fatal(err)
		}
	}
}
