package models

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"svc/runner/sse"
)

// chunkCases are chunk events of real and compatible servers, and odd ones that must go to
// encoding/json.
var chunkCases = []string{
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"x","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	`{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":32,"total_tokens":44,"prompt_tokens_details":{"cached_tokens":3,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`,
	`{"choices":[],"usage":null}`,
	`{"choices":null,"usage":{}}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read","arguments":""}}]}}]}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"path\": \"a\\\\b\"}"}}]}}]}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":null,"function":null}]}}]}`,
	`{"choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}`,
	`{"choices":[{"index":0,"delta":{"reasoning":"via reasoning"}}]}`,
	`{"choices":[{"index":0,"delta":{"reasoning":{"text":"an object"}}}]}`,
	`{"choices":[{"index":0,"delta":{"reasoning":null,"content":null}}]}`,
	`{"choices":[{"index":1,"delta":{"content":"second choice"}},{"index":0,"delta":{"content":"first"}}]}`,
	"  {\n\"choices\" : [ { \"index\" : 0 , \"delta\" : { \"content\" : \"spaced\" } } ] }\n",
	`{"choices":[{"index":0,"delta":{"content":"line\nbreak \"quoted\" tab\t back\\slash \/ \b\f\r \u00e9 \u20ac \ud83d\ude00"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"lone \ud83d surrogate, \ude00 low, \ud83d\u0041 pair broken"}}]}`,
	"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"invalid \xff utf-8 \xe2\x82 cut, valid \xe2\x82\xac\"}}]}",
	`{"choices":[{"index":0,"delta":{"content":"unicode é € 😀"}}]}`,
	`{"error":{"message":"overloaded","type":"server_error","code":null}}`,
	`{"error":null}`,
	`{"choices":[{"index":0,"delta":{"content":"x"}}],"extra":[1,-2.5e3,true,false,null,{"a":[]},"s"]}`,
	// Left to encoding/json: differently cased, duplicate or escaped keys, other types.
	`{"Choices":[{"index":0,"delta":{"Content":"cased"}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"a","content":"b"}}]}`,
	`{"choices":[{"index":0,"delta":{"cont\u0065nt":"escaped key"}}]}`,
	`{"choices":[{"index":0.0,"delta":{"content":"float index"}}]}`,
	`{"choices":[{"index":1e0,"delta":{}}]}`,
	`{"choices":[{"index":"0","delta":{}}]}`,
	`{"choices":[{"index":0,"delta":{"content":5}}]}`,
	`{"choices":{"index":0}}`,
	`{"usage":{"prompt_tokens":99999999999999999999}}`,
	`{"usage":{"prompt_tokens":-3,"completion_tokens":007}}`,
	// Invalid JSON and not an object.
	`{"choices":[{"index":0,"delta":{"content":"unterminated}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"bad \x escape"}}]}`,
	"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"raw \n newline\"}}]}",
	`{"choices":[{"index":0,}]}`,
	`{"choices":[],"extra":01}`,
	`{"choices":[],"extra":tru}`,
	`{"choices":[]} trailing`,
	`{"choices":[]}{}`,
	`[1,2]`,
	`"text"`,
	``,
	"\n",
	`{`,
}

// normalised is c with the fields that differ only in representation between the fast path and
// encoding/json made alike.
func normalised(c openaiChunk, isError bool) (openaiChunk, []string) {
	var thinking []string
	if len(c.Choices) == 0 {
		c.Choices = nil
	}
	c.Choices = append([]openaiChoice(nil), c.Choices...)
	for i := range c.Choices {
		d := &c.Choices[i].Delta
		thinking = append(thinking, d.thinking())
		d.Reasoning, d.reasoning = nil, ""
		if len(d.ToolCalls) == 0 {
			d.ToolCalls = nil
		}
	}
	if isError {
		c.Error = json.RawMessage("set")
	}
	return c, thinking
}

// checkDecodeChunk compares decodeChunk, over a reused chunk, with encoding/json.
func checkDecodeChunk(t *testing.T, reused *openaiChunk, data string) {
	t.Helper()
	isError, err := decodeChunk([]byte(data), reused)
	var want openaiChunk
	wantErr := json.Unmarshal([]byte(data), &want)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%q: error %v, encoding/json says %v", data, err, wantErr)
	}
	if err != nil {
		return
	}
	if isError != (want.Error != nil) {
		t.Errorf("%q: isError %v, encoding/json saw error %q", data, isError, want.Error)
	}
	got, gotThinking := normalised(*reused, isError)
	exp, expThinking := normalised(want, want.Error != nil)
	if !reflect.DeepEqual(got, exp) || !reflect.DeepEqual(gotThinking, expThinking) {
		t.Errorf("%q:\n got %+v thinking %q\nwant %+v thinking %q", data, got, gotThinking, exp, expThinking)
	}
}

func TestDecodeChunkMatchesEncodingJSON(t *testing.T) {
	var reused openaiChunk // reused across cases, as in a stream
	for _, data := range chunkCases {
		checkDecodeChunk(t, &reused, data)
	}
}

func FuzzDecodeChunk(f *testing.F) {
	for _, c := range chunkCases {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, data string) {
		var c openaiChunk
		checkDecodeChunk(t, &c, data)
	})
}

func TestDecodeChunkFastPathAllocations(t *testing.T) {
	data := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"content":"tok "},"logprobs":null,"finish_reason":null}]}`)
	var c openaiChunk
	if _, err := decodeChunk(data, &c); err != nil {
		t.Fatal(err)
	}
	// One allocation: the content string, which outlives the chunk.
	if n := testing.AllocsPerRun(100, func() { _, _ = decodeChunk(data, &c) }); n > 1 {
		t.Errorf("decodeChunk allocates %v times per text chunk, want at most 1", n)
	}
}

func TestUnescapeMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{
		`plain`, `\n\r\t\b\f\/\\\"`, `\u0000\u001f\u007f`, `\u00e9\u20AC`, `\ud83d\ude00`, `\ud83d`, `\ude00`,
		`\ud83d\u0041`, `\ud83d\ud83d\ude00`, "\xff\xfe", "a\xe2\x82", `é\u00e9`, `\ud83dx`,
	} {
		var want string
		if err := json.Unmarshal([]byte(`"`+s+`"`), &want); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if got := unescape([]byte(s)); got != want {
			t.Errorf("unescape(%q) = %q, want %q", s, got, want)
		}
	}
}

func TestEventReader(t *testing.T) {
	long := strings.Repeat("x", 20000) // longer than the reader's buffer
	stream := ": a comment\r\n" +
		"event: message\r\n" +
		"data: {\"a\":1}\r\n" +
		"\r\n" +
		"\n\n" + // empty lines without data dispatch nothing
		"data:no-space\n" +
		"data:  two spaces\n" +
		"id: 7\n" +
		"retry: 10\n" +
		"\n" +
		"data: " + long + "\n" +
		"\n" +
		"data\n" + // a field without colon: a data line with no value
		"\n" +
		"data: cut by the end of the body"
	e := eventReader{r: bufio.NewReaderSize(strings.NewReader(stream), 4096)}
	var got []string
	for {
		data, err := e.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("next: %v", err)
		}
		got = append(got, string(data))
	}
	want := []string{"{\"a\":1}\n", "no-space\n two spaces\n", long + "\n", "\n"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
}

func TestEventReaderLineLimit(t *testing.T) {
	r := io.MultiReader(strings.NewReader("data: "), &repeatReader{b: 'x', n: maxEventLine + 10})
	e := eventReader{r: bufio.NewReaderSize(r, 64<<10)}
	if _, err := e.next(); !errors.Is(err, errEventLine) {
		t.Fatalf("next = %v, want errEventLine", err)
	}
}

// repeatReader reads n copies of b.
type repeatReader struct {
	b byte
	n int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.n)
	for i := range n {
		p[i] = r.b
	}
	r.n -= n
	return n, nil
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{
		"", "plain", "quote \" backslash \\ slash /", "ctl \x00 \x01 \x1f \n \r \t", "é € 😀",
		"invalid \xff \xe2\x82 end", "\u2028 \u2029", "<html> & co",
	} {
		enc := sse.AppendString(nil, s)
		var back string
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatalf("%q encodes to invalid JSON %s: %v", s, enc, err)
		}
		std, _ := json.Marshal(s)
		var want string
		_ = json.Unmarshal(std, &want)
		if back != want {
			t.Errorf("%q round-trips to %q, want %q", s, back, want)
		}
	}
}

func TestChatURL(t *testing.T) {
	for base, want := range map[string]string{
		"https://api.openai.com/v1":   "https://api.openai.com/v1/chat/completions",
		"https://api.openai.com/v1/":  "https://api.openai.com/v1/chat/completions",
		"http://localhost:11434/v1":   "http://localhost:11434/v1/chat/completions",
		"http://127.0.0.1:8000":       "http://127.0.0.1:8000/chat/completions",
		" https://host/openai/v1/ ":   "https://host/openai/v1/chat/completions",
		"https://host/a%2Fb/v1?x=1":   "https://host/a%2Fb/v1/chat/completions?x=1",
		"https://gateway/v1?api=2024": "https://gateway/v1/chat/completions?api=2024",
	} {
		got, err := chatURL(base)
		if err != nil || got != want {
			t.Errorf("chatURL(%q) = %q, %v; want %q", base, got, err, want)
		}
	}
	for _, bad := range []string{"", "localhost:8000", "ftp://host/v1", "http://", "http://[::1"} {
		if got, err := chatURL(bad); err == nil {
			t.Errorf("chatURL(%q) = %q, want an error", bad, got)
		}
	}
}
