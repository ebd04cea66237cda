package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// Minimal HTTP/1.1 framing for the load tool and the fake: net/http's client and server cost more
// CPU per turn than the runtime they measure can spare on a small machine.

// msgHead is what framing needs from a message's header lines.
type msgHead struct {
	length  int64 // Content-Length; -1 when absent
	chunked bool  // Transfer-Encoding: chunked
	close   bool  // Connection: close
	keep    bool  // Connection: keep-alive
}

const maxHeaderLines = 100

var (
	hdrContentLength    = []byte("content-length")
	hdrTransferEncoding = []byte("transfer-encoding")
	hdrConnection       = []byte("connection")
)

// readHeaders reads header lines up to and including the blank line.
func readHeaders(br *bufio.Reader) (msgHead, error) {
	h := msgHead{length: -1}
	for range maxHeaderLines {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				return h, errors.New("header line too long")
			}
			return h, err
		}
		line = trimEOL(line)
		if len(line) == 0 {
			if h.chunked {
				h.length = -1 // Transfer-Encoding overrides Content-Length
			}
			return h, nil
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || bytes.ContainsAny(line[:colon], " \t") {
			return h, fmt.Errorf("malformed header line %q", line)
		}
		name, value := line[:colon], bytes.Trim(line[colon+1:], " \t")
		switch {
		case bytes.EqualFold(name, hdrContentLength):
			n, err := parseLength(value)
			if err != nil || (h.length >= 0 && n != h.length) {
				return h, fmt.Errorf("bad Content-Length %q", value)
			}
			h.length = n
		case bytes.EqualFold(name, hdrTransferEncoding):
			if !bytes.EqualFold(value, []byte("chunked")) {
				return h, fmt.Errorf("unsupported Transfer-Encoding %q", value)
			}
			h.chunked = true
		case bytes.EqualFold(name, hdrConnection):
			for tok := range bytes.SplitSeq(value, []byte(",")) {
				tok = bytes.Trim(tok, " \t")
				h.close = h.close || bytes.EqualFold(tok, []byte("close"))
				h.keep = h.keep || bytes.EqualFold(tok, []byte("keep-alive"))
			}
		}
	}
	return h, fmt.Errorf("more than %d header lines", maxHeaderLines)
}

func trimEOL(line []byte) []byte {
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line
}

func parseLength(b []byte) (int64, error) {
	if len(b) == 0 || len(b) > 15 {
		return 0, errors.New("bad length")
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, errors.New("bad length")
		}
		n = n*10 + int64(c-'0')
	}
	return n, nil
}

// bodyReader reads one message body from br: chunked, by Content-Length, or to EOF. It returns
// io.EOF at the body's end, having read exactly the body's bytes (and a chunked body's trailer).
type bodyReader struct {
	br      *bufio.Reader
	mode    int   // bodyLength, bodyChunked or bodyToEOF
	n       int64 // bytes left of the body (bodyLength) or of the current chunk (bodyChunked)
	crlf    bool  // a chunk's data ended; its CRLF is next
	done    bool
	lastErr error
}

const (
	bodyLength = iota
	bodyChunked
	bodyToEOF
)

var errChunk = errors.New("malformed chunked body")

func (b *bodyReader) reset(br *bufio.Reader, h msgHead, toEOF bool) {
	*b = bodyReader{br: br, mode: bodyLength, n: max(h.length, 0)}
	switch {
	case h.chunked:
		b.mode = bodyChunked
	case h.length < 0 && toEOF:
		b.mode = bodyToEOF
	}
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.lastErr != nil {
		return 0, b.lastErr
	}
	if b.done {
		return 0, io.EOF
	}
	if b.mode == bodyToEOF {
		n, err := b.br.Read(p)
		if errors.Is(err, io.EOF) {
			b.done = true
		}
		return n, err
	}
	if b.mode == bodyChunked && b.n == 0 {
		if err := b.nextChunk(); err != nil {
			b.lastErr = err
			return 0, err
		}
		if b.done {
			return 0, io.EOF
		}
	}
	if b.n == 0 { // bodyLength at its end
		b.done = true
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.br.Read(p)
	b.n -= int64(n)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		b.lastErr = err
	}
	return n, err
}

// discard skips the rest of the body.
func (b *bodyReader) discard() error {
	for !b.done && b.lastErr == nil {
		if b.mode == bodyToEOF {
			_, err := io.Copy(io.Discard, b.br)
			b.done = true
			return err
		}
		if b.mode == bodyChunked && b.n == 0 {
			if err := b.nextChunk(); err != nil {
				b.lastErr = err
			}
			continue
		}
		if b.n == 0 {
			b.done = true
			break
		}
		n, err := b.br.Discard(int(min(b.n, 1<<30)))
		b.n -= int64(n)
		if err != nil {
			b.lastErr = io.ErrUnexpectedEOF
		}
	}
	return b.lastErr
}

// nextChunk reads the CRLF ending the previous chunk, then the next chunk's size line; at the
// last chunk, it reads the trailer and marks the body done.
func (b *bodyReader) nextChunk() error {
	if b.crlf {
		line, err := b.br.ReadSlice('\n')
		if err != nil || len(trimEOL(line)) != 0 {
			return errChunk
		}
		b.crlf = false
	}
	line, err := b.br.ReadSlice('\n')
	if err != nil {
		return errChunk
	}
	line = trimEOL(line)
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i] // chunk extensions
	}
	line = bytes.Trim(line, " \t")
	if len(line) == 0 || len(line) > 12 {
		return errChunk
	}
	var size int64
	for _, c := range line {
		switch {
		case '0' <= c && c <= '9':
			size = size<<4 | int64(c-'0')
		case 'a' <= c && c <= 'f':
			size = size<<4 | int64(c-'a'+10)
		case 'A' <= c && c <= 'F':
			size = size<<4 | int64(c-'A'+10)
		default:
			return errChunk
		}
	}
	if size == 0 {
		for range maxHeaderLines { // the trailer
			line, err := b.br.ReadSlice('\n')
			if err != nil {
				return errChunk
			}
			if len(trimEOL(line)) == 0 {
				b.done = true
				return nil
			}
		}
		return errChunk
	}
	b.n, b.crlf = size, true
	return nil
}

// rawClient is one persistent HTTP/1.1 connection to the runtime, owned by one goroutine. It dials
// lazily and redials after an error or a Connection: close.
type rawClient struct {
	d    *driver
	ctx  context.Context
	stop func() bool // unregisters the cancel callback

	mu        sync.Mutex // guards conn against the cancel callback; taken only to dial, close and cancel
	conn      net.Conn
	cancelled bool

	br      *bufio.Reader // over conn
	body    bodyReader    // the current response's body
	lines   *bufio.Reader // over body
	req     []byte        // the request being written
	reqBody []byte        // its body, built by driver.body
	reused  bool          // conn has answered a request before
	reuse   bool          // the current response leaves conn usable
	began   time.Time     // just before the request was written
}

// newClient returns a client whose reads and writes fail once ctx is done. bufSize is the size
// of its read buffers: the connection's and the one SSE lines are read with.
func (d *driver) newClient(ctx context.Context, bufSize int) *rawClient {
	c := &rawClient{d: d, ctx: ctx, br: bufio.NewReaderSize(nil, bufSize), req: make([]byte, 0, 512)}
	c.lines = bufio.NewReaderSize(&c.body, bufSize)
	c.stop = context.AfterFunc(ctx, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.cancelled = true
		if c.conn != nil {
			_ = c.conn.Close() // unblocks the owner, which then finds ctx done
		}
	})
	return c
}

// Close closes the connection.
func (c *rawClient) Close() {
	c.stop()
	c.closeConn()
}

func (c *rawClient) closeConn() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
}

func (c *rawClient) dial() error {
	var dialer net.Dialer
	conn, err := dialer.DialContext(c.ctx, "tcp", c.d.addr)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelled {
		_ = conn.Close()
		return context.Canceled
	}
	c.conn, c.reused = conn, false
	c.br.Reset(conn)
	return nil
}

// post sends body to the runtime's /chat/stream and reads the response's status line and header;
// the body is then read from c.lines (or c.body), and done() must follow.
func (c *rawClient) post(body []byte) (status int, err error) {
	c.req = append(c.req[:0], c.d.prefix...)
	c.req = strconv.AppendInt(c.req, int64(len(body)), 10)
	c.req = append(c.req, "\r\n\r\n"...)
	c.req = append(c.req, body...)
	for attempt := 0; ; attempt++ {
		if c.conn == nil {
			if err := c.dial(); err != nil {
				return 0, err
			}
		}
		// A kept-alive connection the server closed meanwhile fails before any answer: retry once.
		retry := c.reused && attempt == 0
		c.began = time.Now()
		if _, err := c.conn.Write(c.req); err != nil {
			c.closeConn()
			if retry {
				continue
			}
			return 0, err
		}
		status, h, answered, err := c.readHead()
		if err != nil {
			c.closeConn()
			if retry && !answered {
				continue
			}
			return 0, err
		}
		c.body.reset(c.br, h, true)
		c.lines.Reset(&c.body)
		c.reuse = !h.close && c.body.mode != bodyToEOF
		return status, nil
	}
}

// readHead reads the status line and header, skipping interim (1xx) responses. answered
// reports whether any byte of a response came.
func (c *rawClient) readHead() (status int, h msgHead, answered bool, err error) {
	for {
		line, err := c.br.ReadSlice('\n')
		answered = answered || len(line) > 0
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				err = errors.New("status line too long")
			}
			return 0, h, answered, err
		}
		line = trimEOL(line)
		// HTTP/1.x NNN[ reason]
		if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' || (len(line) > 12 && line[12] != ' ') {
			return 0, h, answered, fmt.Errorf("malformed status line %q", line)
		}
		n, perr := parseLength(line[9:12])
		if perr != nil {
			return 0, h, answered, fmt.Errorf("malformed status line %q", line)
		}
		status = int(n)
		if h, err = readHeaders(c.br); err != nil {
			return 0, h, answered, err
		}
		if status == 204 || status == 304 {
			h.length, h.chunked = 0, false
		}
		if status < 100 || status >= 200 || status == 101 {
			return status, h, answered, nil
		}
	}
}

// done ends the current response: ok when its body was read to the end.
func (c *rawClient) done(ok bool) {
	if ok && c.reuse && c.body.done {
		c.reused = true
		return
	}
	c.closeConn()
}
