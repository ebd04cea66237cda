package models

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// dechunk reads wire as a chunked body: its first head bytes buffered in a head reader, the
// rest from the connection in reads of at most step bytes, into a buffer of size bytes.
func dechunk(t *testing.T, wire string, head, step, size int) (string, *dechunker, error) {
	t.Helper()
	br := bufio.NewReaderSize(strings.NewReader(wire[:head]), 16)
	if head > 0 {
		if _, err := br.Peek(min(head, 16)); err != nil {
			t.Fatal(err)
		}
	}
	released := 0
	var conn io.Reader = strings.NewReader(wire[br.Buffered():])
	if step > 0 {
		conn = &stepReader{r: conn, n: step}
	}
	d := &dechunker{br: br, conn: conn, release: func(got *bufio.Reader) {
		if got != br {
			t.Error("released another reader")
		}
		released++
	}}
	var out bytes.Buffer
	buf := make([]byte, size)
	for {
		n, err := d.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			if released > 1 {
				t.Errorf("the head's reader released %d times", released)
			}
			return out.String(), d, err
		}
		if n == 0 {
			t.Fatal("a read of nothing without an error")
		}
	}
}

// stepReader reads at most n bytes at a time.
type stepReader struct {
	r io.Reader
	n int
}

func (s *stepReader) Read(p []byte) (int, error) { return s.r.Read(p[:min(len(p), s.n)]) }

// Every body reads to its data whatever the reads' sizes, the buffer's size and what the head's
// reader held: framing split anywhere, extensions, hex in both cases, trailers, a chunk larger
// than the buffer.
func TestDechunker(t *testing.T) {
	long := strings.Repeat("0123456789abcdef", 40)
	for _, c := range []struct{ name, wire, want string }{
		{"one chunk", "5\r\nhello\r\n0\r\n\r\n", "hello"},
		{"several", "5\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\n\r\n", "hello world"},
		{"events", "e\r\ndata: {\"a\":1}\n\r\n6\r\n\ndata:\r\n8\r\n [DONE]\n\r\n0\r\n\r\n", "data: {\"a\":1}\n\ndata: [DONE]\n"},
		{"extension and hex", "A;name=value\r\n0123456789\r\n1a ; x\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n", "0123456789abcdefghijklmnopqrstuvwxyz"},
		{"trailers", "3\r\nabc\r\n0\r\nX-One: 1\r\nX-Two: 2\r\n\r\n", "abc"},
		{"bare LF after the size", "3\nabc\r\n0\n\n", "abc"},
		{"empty", "0\r\n\r\n", ""},
		{"larger than the buffer", "280\r\n" + long + "\r\n0\r\n\r\n", long},
	} {
		t.Run(c.name, func(t *testing.T) {
			for head := 0; head <= min(len(c.wire), 16); head += 3 {
				for _, step := range []int{0, 1, 2, 7} {
					for _, size := range []int{1, 5, 64, 4096} {
						got, d, err := dechunk(t, c.wire, head, step, size)
						if err != nil || got != c.want {
							t.Fatalf("head %d, step %d, buffer %d: %q, %v; want %q", head, step, size, got, err, c.want)
						}
						if !d.drained() {
							t.Fatalf("head %d, step %d, buffer %d: not drained at the end", head, step, size)
						}
					}
				}
			}
		})
	}
}

// Framing that breaks the rules is an error, never data; a body that stops early is
// io.ErrUnexpectedEOF; bytes after the end leave the connection unfit for another call.
func TestDechunkerRefuses(t *testing.T) {
	for _, c := range []struct {
		name, wire string
		want       error
	}{
		{"no size", "\r\nabc\r\n0\r\n\r\n", errMalformedChunk},
		{"not hex", "x\r\nabc\r\n0\r\n\r\n", errMalformedChunk},
		{"no CRLF after the data", "3\r\nabcd\r\n0\r\n\r\n", errMalformedChunk},
		{"CR without LF after the data", "3\r\nabc\rX0\r\n\r\n", errMalformedChunk},
		{"too large", "fffffffffffffffff\r\n", errMalformedChunk},
		{"endless extension", "3;" + strings.Repeat("x", maxChunkLine+1) + "\r\nabc\r\n0\r\n\r\n", errMalformedChunk},
		{"endless trailer", "0\r\n" + strings.Repeat("x", maxChunkLine+1), errMalformedChunk},
		{"cut in the data", "5\r\nhel", io.ErrUnexpectedEOF},
		{"cut before the last chunk", "5\r\nhello\r\n", io.ErrUnexpectedEOF},
		{"cut in the trailer", "0\r\nX: 1\r\n", io.ErrUnexpectedEOF},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, step := range []int{0, 1} {
				_, _, err := dechunk(t, c.wire, 0, step, 64)
				if !errors.Is(err, c.want) {
					t.Errorf("step %d: %v, want %v", step, err, c.want)
				}
			}
		})
	}
	for _, head := range []int{0, 16} {
		_, d, err := dechunk(t, "3\r\nabc\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n", head, 0, 64)
		if err != nil || d.drained() {
			t.Errorf("head %d: bytes after the end: %v, drained %v; want no error, not drained", head, err, d.drained())
		}
	}
}

// A reader that returns its last bytes with io.EOF is read to the body's end all the same.
func TestDechunkerDataWithEOF(t *testing.T) {
	d := &dechunker{conn: iotest.DataErrReader(strings.NewReader("3\r\nabc\r\n0\r\n\r\n"))}
	got, err := io.ReadAll(d)
	if err != nil || string(got) != "abc" || !d.drained() {
		t.Errorf("%q, %v, drained %v", got, err, d.drained())
	}
}
