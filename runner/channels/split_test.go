package channels_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"svc/runner/channels"
)

func TestUTF16Len(t *testing.T) {
	tests := []struct {
		s    string
		want int
	}{
		{"", 0},
		{"abc", 3},
		{"é", 1},
		{"日本", 2},
		{"😀", 2},
		{"👍🏽", 4},
		{"\xff", 1},
	}
	for _, tt := range tests {
		if got := channels.UTF16Len(tt.s); got != tt.want {
			t.Errorf("UTF16Len(%q) = %d, want %d", tt.s, got, tt.want)
		}
	}
}

func TestSplit(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		limit int
		want  []string
	}{
		{"empty", "", 10, nil},
		{"fits", "hello", 5, []string{"hello"}},
		{"paragraph", "aaaa\n\nbbbb cc", 8, []string{"aaaa\n\n", "bbbb cc"}},
		{"line before word", "aaaaa\nb cc dd", 10, []string{"aaaaa\n", "b cc dd"}},
		{"line too early, word", "aaa\nbbb ccc", 9, []string{"aaa\nbbb ", "ccc"}},
		{"paragraph too early, word", "a\n\nbbbbbb ccc", 11, []string{"a\n\nbbbbbb ", "ccc"}},
		{"word", "aaaa bbbb cccc", 10, []string{"aaaa bbbb ", "cccc"}},
		{"hard", "abcdefghij", 4, []string{"abcd", "efgh", "ij"}},
		{"emoji not halved", "abc😀def", 4, []string{"abc", "😀de", "f"}},
		{"emoji with skin tone kept", "ab👍🏽cd", 5, []string{"ab", "👍🏽c", "d"}},
		{"zwj sequence kept", "a👩\u200d💻b", 5, []string{"a", "👩\u200d💻", "b"}},
		{"flag kept", "ab🇳🇴🇸🇪", 6, []string{"ab🇳🇴", "🇸🇪"}},
		{"combining mark kept", "abce\u0301f", 4, []string{"abc", "e\u0301f"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := channels.Split(tt.text, tt.limit)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Split(%q, %d) (-want +got):\n%s", tt.text, tt.limit, diff)
			}
			checkSplit(t, tt.text, tt.limit, got)
		})
	}
}

// TestSplitTelegramAnswer: a 5,000-character answer is two Telegram messages.
func TestSplitTelegramAnswer(t *testing.T) {
	var b strings.Builder
	for b.Len() < 5000 {
		b.WriteString("Lorem ipsum dolor sit amet. ")
	}
	text := b.String()[:5000]
	got := channels.Split(text, 4096)
	if len(got) != 2 {
		t.Fatalf("Split of 5,000 characters = %d chunks, want 2", len(got))
	}
	checkSplit(t, text, 4096, got)
}

// checkSplit checks Split's promises: the chunks concatenate to text, none is empty, each is
// within limit UTF-16 units, and none starts or ends inside a UTF-8 character.
func checkSplit(t *testing.T, text string, limit int, chunks []string) {
	t.Helper()
	if got := strings.Join(chunks, ""); got != text {
		t.Fatalf("chunks join to %q, want %q", got, text)
	}
	for i, c := range chunks {
		if c == "" {
			t.Errorf("chunk %d is empty", i)
		}
		if n := channels.UTF16Len(c); n > max(limit, 2) {
			t.Errorf("chunk %d is %d UTF-16 units, more than %d", i, n, limit)
		}
		if utf8.ValidString(text) && !utf8.ValidString(c) {
			t.Errorf("chunk %d %q cuts a UTF-8 character", i, c)
		}
	}
}

// FuzzSplit: whatever the text and limit, Split keeps its promises. Run it with
// go test -run '^$' -fuzz FuzzSplit -fuzztime 20s ./runner/channels/
func FuzzSplit(f *testing.F) {
	f.Add("hello world", 4)
	f.Add("aaaa\n\nbbbb cc", 8)
	f.Add("ab👍🏽cd👩\u200d💻🇳🇴🇸🇪e\u0301", 3)
	f.Add(strings.Repeat("😀", 50), 7)
	f.Add("\xff\xfe text \xc3", 2)
	f.Add(strings.Repeat("\u0301", 40), 5)
	f.Fuzz(func(t *testing.T, text string, limit int) {
		limit = limit%5000 + 1
		if limit < 0 {
			limit = -limit
		}
		checkSplit(t, text, limit, channels.Split(text, limit))
	})
}
