package channels_test

import (
	"errors"
	"strings"
	"testing"

	"svc/runner/channels"
)

func TestCallbackRoundTrip(t *testing.T) {
	longest := strings.Repeat("x", channels.MaxCallbackData-len("q::24"))
	tests := []struct {
		name string
		c    channels.Callback
		want string
	}{
		{"approve", channels.Callback{Kind: channels.ActionApproval, ID: "apr_abcdefghijklmnop", Approved: true}, "a:apr_abcdefghijklmnop:y"},
		{"deny", channels.Callback{Kind: channels.ActionApproval, ID: "apr_abcdefghijklmnop"}, "a:apr_abcdefghijklmnop:n"},
		{"first option", channels.Callback{Kind: channels.ActionChoice, ID: "ask_abcdefghijklmnop"}, "q:ask_abcdefghijklmnop:0"},
		{"last option", channels.Callback{Kind: channels.ActionChoice, ID: "ask_1", Option: channels.MaxOptions - 1}, "q:ask_1:24"},
		{"longest id", channels.Callback{Kind: channels.ActionChoice, ID: longest, Option: 24}, "q:" + longest + ":24"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.c.Encode()
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if got != tt.want {
				t.Errorf("Encode = %q, want %q", got, tt.want)
			}
			if len(got) > channels.MaxCallbackData {
				t.Errorf("Encode = %d bytes, more than %d", len(got), channels.MaxCallbackData)
			}
			back, err := channels.DecodeCallback(got)
			if err != nil {
				t.Fatalf("DecodeCallback: %v", err)
			}
			if back != tt.c {
				t.Errorf("DecodeCallback(%q) = %+v, want %+v", got, back, tt.c)
			}
		})
	}
}

func TestCallbackRefused(t *testing.T) {
	encode := []struct {
		name string
		c    channels.Callback
	}{
		{"empty id", channels.Callback{Kind: channels.ActionApproval}},
		{"id with separator", channels.Callback{Kind: channels.ActionApproval, ID: "a:b"}},
		{"id with space", channels.Callback{Kind: channels.ActionApproval, ID: "a b"}},
		{"id too long", channels.Callback{Kind: channels.ActionChoice, ID: strings.Repeat("x", 60), Option: 24}},
		{"negative option", channels.Callback{Kind: channels.ActionChoice, ID: "ask_1", Option: -1}},
		{"option too high", channels.Callback{Kind: channels.ActionChoice, ID: "ask_1", Option: channels.MaxOptions}},
		{"unknown kind", channels.Callback{Kind: "z", ID: "x"}},
	}
	for _, tt := range encode {
		t.Run("encode "+tt.name, func(t *testing.T) {
			if got, err := tt.c.Encode(); !errors.Is(err, channels.ErrCallbackData) {
				t.Errorf("Encode = %q, %v; want ErrCallbackData", got, err)
			}
		})
	}
	for _, data := range []string{"", "a", "a:x", "a:x:maybe", "q:x:-1", "q:x:01", "q:x:25", "q:x:", "z:x:1", "a::y", "a:x y:y", strings.Repeat("a", 65)} {
		t.Run("decode "+data, func(t *testing.T) {
			if got, err := channels.DecodeCallback(data); !errors.Is(err, channels.ErrCallbackData) {
				t.Errorf("DecodeCallback(%q) = %+v, %v; want ErrCallbackData", data, got, err)
			}
		})
	}
}
