package models

// The decoder of OpenAI's chat completion chunks: written for their one shape, it reads a chunk
// with a fraction of the time and allocations of encoding/json's reflection, and hands anything
// it does not expect to encoding/json. It is on the hot path of every streamed turn;
// openai_stream.go reads the events that carry the chunks.

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// decodeChunk decodes the data of one event into c, reusing c's storage. It reports whether
// the event is an error event (an "error" member), whose data the caller reads itself.
//
// Chunks are small and always shaped alike, so a decoder written for that shape reads them
// with a fraction of the time and allocations of encoding/json's reflection. Anything it does
// not expect (a duplicate or differently cased key, a number that is not an int, a string
// where an object belongs, invalid JSON) is handed to encoding/json, which decides.
func decodeChunk(data []byte, c *openaiChunk) (isError bool, err error) {
	d := chunkDecoder{b: data}
	c.Choices = c.Choices[:0]
	c.Usage = nil
	c.Error = nil
	if ok, isErr := d.chunk(c); ok {
		return isErr, nil
	}
	*c = openaiChunk{}
	if err := json.Unmarshal(data, c); err != nil {
		return false, err
	}
	return c.Error != nil, nil
}

// chunkDecoder is the fast path of decodeChunk. Each method returns false on anything
// unexpected; the input is then decoded again by encoding/json.
type chunkDecoder struct {
	b []byte
	i int
}

// chunk reads the whole input: one object and nothing after it but spaces.
func (d *chunkDecoder) chunk(c *openaiChunk) (ok, isError bool) {
	var seen uint8
	ok = d.object(func(key []byte) bool {
		switch string(key) {
		case "choices":
			return once(&seen, 1) && d.choices(c)
		case "usage":
			if !once(&seen, 2) {
				return false
			}
			if d.null() {
				return true
			}
			c.Usage = &openaiUsage{}
			return d.usage(c.Usage)
		case "error":
			isError = true
			return once(&seen, 4) && d.skip()
		}
		return unknownKey(key, "choices", "usage", "error") && d.skip()
	})
	d.space()
	return ok && d.i == len(d.b), isError
}

// once marks bit in seen and reports whether it was not marked yet.
func once(seen *uint8, bit uint8) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// unknownKey reports whether key is none of known, even ignoring case (encoding/json matches
// keys case-insensitively, so such a key is left to it).
func unknownKey(key []byte, known ...string) bool {
	for _, k := range known {
		if len(k) == len(key) && strings.EqualFold(string(key), k) {
			return false
		}
	}
	return true
}

func (d *chunkDecoder) choices(c *openaiChunk) bool {
	if d.null() {
		return true
	}
	return d.array(func() bool {
		c.Choices = append(c.Choices, openaiChoice{})
		ch := &c.Choices[len(c.Choices)-1]
		var seen uint8
		return d.object(func(key []byte) bool {
			switch string(key) {
			case "index":
				return once(&seen, 1) && d.int(&ch.Index)
			case "delta":
				return once(&seen, 2) && d.delta(&ch.Delta)
			case "finish_reason":
				return once(&seen, 4) && d.string(&ch.FinishReason)
			}
			return unknownKey(key, "index", "delta", "finish_reason") && d.skip()
		})
	})
}

func (d *chunkDecoder) delta(dl *openaiDelta) bool {
	if d.null() {
		return true
	}
	var seen uint8
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "content":
			return once(&seen, 1) && d.string(&dl.Content)
		case "refusal":
			return once(&seen, 2) && d.string(&dl.Refusal)
		case "reasoning_content":
			return once(&seen, 4) && d.string(&dl.ReasoningContent)
		case "reasoning":
			if !once(&seen, 8) {
				return false
			}
			if d.peek() == '"' {
				return d.string(&dl.reasoning)
			}
			return d.skip() // another shape: ignored
		case "tool_calls":
			return once(&seen, 16) && d.toolCalls(dl)
		}
		return unknownKey(key, "content", "refusal", "reasoning_content", "reasoning", "tool_calls") && d.skip()
	})
}

func (d *chunkDecoder) toolCalls(dl *openaiDelta) bool {
	if d.null() {
		return true
	}
	return d.array(func() bool {
		dl.ToolCalls = append(dl.ToolCalls, openaiToolCallDelta{})
		tc := &dl.ToolCalls[len(dl.ToolCalls)-1]
		var seen uint8
		return d.object(func(key []byte) bool {
			switch string(key) {
			case "index":
				return once(&seen, 1) && d.int(&tc.Index)
			case "id":
				return once(&seen, 2) && d.string(&tc.ID)
			case "function":
				if !once(&seen, 4) {
					return false
				}
				if d.null() {
					return true
				}
				var fseen uint8
				return d.object(func(key []byte) bool {
					switch string(key) {
					case "name":
						return once(&fseen, 1) && d.string(&tc.Function.Name)
					case "arguments":
						return once(&fseen, 2) && d.string(&tc.Function.Arguments)
					}
					return unknownKey(key, "name", "arguments") && d.skip()
				})
			}
			return unknownKey(key, "index", "id", "function") && d.skip()
		})
	})
}

func (d *chunkDecoder) usage(u *openaiUsage) bool {
	var seen uint8
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "prompt_tokens":
			return once(&seen, 1) && d.int(&u.PromptTokens)
		case "completion_tokens":
			return once(&seen, 2) && d.int(&u.CompletionTokens)
		case "prompt_tokens_details":
			if !once(&seen, 4) {
				return false
			}
			if d.null() {
				return true
			}
			var dseen uint8
			return d.object(func(key []byte) bool {
				if string(key) == "cached_tokens" {
					return once(&dseen, 1) && d.int(&u.PromptTokensDetails.CachedTokens)
				}
				return unknownKey(key, "cached_tokens") && d.skip()
			})
		}
		return unknownKey(key, "prompt_tokens", "completion_tokens", "prompt_tokens_details") && d.skip()
	})
}

// space skips JSON white space.
func (d *chunkDecoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek is the next byte after white space, or 0 at the end.
func (d *chunkDecoder) peek() byte {
	d.space()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// null consumes a null literal if one is next.
func (d *chunkDecoder) null() bool {
	if d.peek() == 'n' && bytes.HasPrefix(d.b[d.i:], []byte("null")) {
		d.i += 4
		return true
	}
	return false
}

// object reads an object, calling member with each key (unescaped keys only) positioned
// before its value.
func (d *chunkDecoder) object(member func(key []byte) bool) bool {
	if d.peek() != '{' {
		return false
	}
	d.i++
	if d.peek() == '}' {
		d.i++
		return true
	}
	for {
		if d.peek() != '"' {
			return false
		}
		key, escaped, ok := d.str()
		if !ok || escaped || d.peek() != ':' {
			return false
		}
		d.i++
		if !member(key) {
			return false
		}
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return true
		default:
			return false
		}
	}
}

// array reads an array, calling elem positioned before each element.
func (d *chunkDecoder) array(elem func() bool) bool {
	if d.peek() != '[' {
		return false
	}
	d.i++
	if d.peek() == ']' {
		d.i++
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			return true
		default:
			return false
		}
	}
}

// str reads a string token and returns its raw content, whether it holds escapes, and
// whether it is well formed. Non-ASCII content counts as escaped when it is not valid UTF-8.
func (d *chunkDecoder) str() (raw []byte, escaped, ok bool) {
	d.i++ // the opening quote
	start := d.i
	ascii := true
	for d.i < len(d.b) {
		for d.i < len(d.b) { // the common bytes first, in a tight loop
			if c := d.b[d.i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
				break
			}
			d.i++
		}
		if d.i == len(d.b) {
			break
		}
		c := d.b[d.i]
		switch {
		case c == '"':
			raw = d.b[start:d.i]
			d.i++
			if !ascii && !escaped && !utf8.Valid(raw) {
				escaped = true // decodeString replaces the invalid bytes
			}
			return raw, escaped, true
		case c == '\\':
			escaped = true
			d.i++
			if d.i >= len(d.b) {
				return nil, false, false
			}
			switch d.b[d.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i++
			case 'u':
				if d.i+5 > len(d.b) {
					return nil, false, false
				}
				for _, h := range d.b[d.i+1 : d.i+5] {
					if hexValue(h) < 0 {
						return nil, false, false
					}
				}
				d.i += 5
			default:
				return nil, false, false
			}
		case c < 0x20:
			return nil, false, false
		default:
			if c >= utf8.RuneSelf {
				ascii = false
			}
			d.i++
		}
	}
	return nil, false, false
}

// string reads a string or null into *s.
func (d *chunkDecoder) string(s *string) bool {
	switch d.peek() {
	case '"':
		raw, escaped, ok := d.str()
		if !ok {
			return false
		}
		if escaped {
			*s = unescape(raw)
		} else {
			*s = string(raw)
		}
		return true
	case 'n':
		return d.null()
	}
	return false
}

// int reads an integer that fits an int, or null (which leaves *n as it is).
func (d *chunkDecoder) int(n *int) bool {
	if d.null() {
		return true
	}
	start := d.i
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	digits := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	if d.i == digits || (d.b[digits] == '0' && d.i > digits+1) {
		return false
	}
	if d.i < len(d.b) {
		switch d.b[d.i] {
		case '.', 'e', 'E':
			return false // a fraction or exponent: encoding/json decides
		}
	}
	v, err := strconv.Atoi(string(d.b[start:d.i]))
	if err != nil {
		return false
	}
	*n = v
	return true
}

// skip reads and checks any value.
func (d *chunkDecoder) skip() bool {
	switch c := d.peek(); {
	case c == '{':
		return d.object(func([]byte) bool { return d.skip() })
	case c == '[':
		return d.array(d.skip)
	case c == '"':
		_, _, ok := d.str()
		return ok
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.null()
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	}
	return false
}

func (d *chunkDecoder) literal(lit string) bool {
	if !bytes.HasPrefix(d.b[d.i:], []byte(lit)) {
		return false
	}
	d.i += len(lit)
	return true
}

// number reads a JSON number.
func (d *chunkDecoder) number() bool {
	digits := func() int {
		start := d.i
		for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
			d.i++
		}
		return d.i - start
	}
	if d.b[d.i] == '-' {
		d.i++
	}
	first := d.i
	n := digits()
	if n == 0 || (n > 1 && d.b[first] == '0') {
		return false
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if digits() == 0 {
			return false
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}

// hexValue is the value of a hex digit, or -1.
func hexValue(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c - 'a' + 10)
	case c >= 'A' && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// hex4 is the value of four hex digits checked by str.
func hex4(b []byte) rune {
	return hexValue(b[0])<<12 | hexValue(b[1])<<8 | hexValue(b[2])<<4 | hexValue(b[3])
}

// unescape decodes the content of a string checked by str, as encoding/json does: invalid
// UTF-8 and lone surrogates become U+FFFD.
func unescape(raw []byte) string {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			i++
			switch raw[i] {
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := hex4(raw[i+1:])
				i += 4
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if i+6 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
						r2 = hex4(raw[i+3:])
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						r = dec
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				out = utf8.AppendRune(out, r)
			default: // " \ /
				out = append(out, raw[i])
			}
			i++
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, raw[i:i+size]...)
			}
			i += size
		}
	}
	return string(out)
}
