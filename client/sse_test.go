package client

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

// readAll parses stream with the given limit and returns its events and the final error.
func readAll(stream io.Reader, max int) ([]event, error) {
	sr := newSSEReader(stream, max)
	var out []event
	for {
		ev, err := sr.next()
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		want   []event
	}{
		{"one frame", "data: {\"a\":1}\n\n", []event{{data: []byte(`{"a":1}`)}}},
		{"no space after colon", "data:x\n\n", []event{{data: []byte("x")}}},
		{"only one leading space is removed", "data:  x\n\n", []event{{data: []byte(" x")}}},
		{"multi-line data joins with newline", "data: {\"a\":\ndata: 1}\n\n", []event{{data: []byte("{\"a\":\n1}")}}},
		{"empty data line", "data\ndata: x\n\n", []event{{data: []byte("\nx")}}},
		{"comments are skipped", ": keep-alive\ndata: x\n: another\n\n:ping\n\n", []event{{data: []byte("x")}}},
		{"id persists across events", "id: 7\ndata: a\n\ndata: b\n\nid: 8\ndata: c\n\n",
			[]event{{id: "7", data: []byte("a")}, {id: "7", data: []byte("b")}, {id: "8", data: []byte("c")}}},
		{"id with NUL is ignored", "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n",
			[]event{{id: "1", data: []byte("a")}, {id: "1", data: []byte("b")}}},
		{"event name applies to one event", "event: x\ndata: a\n\ndata: b\n\n",
			[]event{{name: "x", data: []byte("a")}, {data: []byte("b")}}},
		{"blank lines without data dispatch nothing", "\n\nevent: x\n\ndata: a\n\n", []event{{data: []byte("a")}}},
		{"retry and unknown fields are ignored", "retry: 10\nfoo: bar\ndata: a\n\n", []event{{data: []byte("a")}}},
		{"CRLF line endings", "data: a\r\ndata: b\r\n\r\n", []event{{data: []byte("a\nb")}}},
		{"CR line endings", "data: a\rdata: b\r\rdata: c\r\r", []event{{data: []byte("a\nb")}, {data: []byte("c")}}},
		{"byte order mark", "\xEF\xBB\xBFdata: a\n\n", []event{{data: []byte("a")}}},
		{"unfinished event at the end is discarded", "data: a\n\ndata: b\n", []event{{data: []byte("a")}}},
		{"unfinished line at the end is discarded", "data: a\n\ndata: b", []event{{data: []byte("a")}}},
		{"colon in the value stays", "data: a:b: c\n\n", []event{{data: []byte("a:b: c")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// One byte per read too: the parser must not depend on how the stream is chunked.
			for _, r := range []io.Reader{strings.NewReader(tt.stream), iotest.OneByteReader(strings.NewReader(tt.stream))} {
				got, err := readAll(r, MaxEventSize)
				if !errors.Is(err, io.EOF) {
					t.Fatalf("error = %v, want io.EOF", err)
				}
				if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(event{})); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestSSEReaderLimit(t *testing.T) {
	atLimit := strings.Repeat("x", MaxEventSize)
	got, err := readAll(strings.NewReader("data: "+atLimit+"\n\n"), MaxEventSize)
	if !errors.Is(err, io.EOF) || len(got) != 1 || len(got[0].data) != MaxEventSize {
		t.Fatalf("event of exactly %d bytes: %d events, error %v; want 1 event and io.EOF", MaxEventSize, len(got), err)
	}
	// One byte more, in one line or spread over two data lines (the joining newline counts).
	for name, stream := range map[string]string{
		"one line":  "data: " + atLimit + "x\n\n",
		"two lines": "data: " + atLimit[:10] + "\ndata: " + atLimit[11:] + "x\n\n",
	} {
		if _, err := readAll(strings.NewReader(stream), MaxEventSize); !errors.Is(err, ErrEventTooLarge) {
			t.Errorf("%s: error = %v, want ErrEventTooLarge", name, err)
		}
	}
}

func TestReadFrames(t *testing.T) {
	tests := []struct {
		name    string
		stream  string
		want    []string // frame types
		wantErr error
		errText string
	}{
		{"stops at done", "data: {\"type\":\"init\",\"session_id\":\"s\"}\n\ndata: {\"type\":\"done\"}\n\ndata: {\"type\":\"text_delta\"}\n\n",
			[]string{"init", "done"}, nil, ""},
		{"ends before done", "data: {\"type\":\"init\"}\n\n", []string{"init"}, ErrStreamEnded, ""},
		{"not JSON", "data: {\"type\":\"init\"}\n\ndata: nope\n\n", []string{"init"}, nil, "frame 2 is not a JSON object"},
		{"no type", "data: {\"content\":\"x\"}\n\n", nil, nil, "frame 1 has no type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			err := readFrames(context.Background(), strings.NewReader(tt.stream), func(f Frame) error {
				got = append(got, f.Type)
				return nil
			})
			switch {
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("error = %v, want %v", err, tt.wantErr)
			case tt.errText != "" && (err == nil || !strings.Contains(err.Error(), tt.errText)):
				t.Errorf("error = %v, want one containing %q", err, tt.errText)
			case tt.wantErr == nil && tt.errText == "" && err != nil:
				t.Errorf("error = %v, want nil", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("frames (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadFramesCallbackError(t *testing.T) {
	stop := errors.New("stop")
	err := readFrames(context.Background(), strings.NewReader("data: {\"type\":\"init\"}\n\n"), func(Frame) error { return stop })
	if !errors.Is(err, stop) {
		t.Errorf("error = %v, want the callback's error", err)
	}
}

func TestFrameFields(t *testing.T) {
	stream := "id: 42\ndata: {\"type\":\"tool_call_result\",\"tool_id\":\"t1\",\"status\":\"error\",\"error\":\"boom\",\"result\":{\"x\":1},\"extra\":true}\n\n"
	var got Frame
	err := readFrames(context.Background(), strings.NewReader(stream), func(f Frame) error { got = f; return nil })
	if !errors.Is(err, ErrStreamEnded) {
		t.Fatalf("error = %v, want ErrStreamEnded", err)
	}
	if got.ID != "42" || got.ToolID != "t1" || got.Status != "error" || got.Error != "boom" || string(got.Result) != `{"x":1}` ||
		!strings.Contains(string(got.Raw), `"extra":true`) {
		t.Errorf("frame = %+v", got)
	}
}
