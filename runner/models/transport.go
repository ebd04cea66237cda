package models

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Transport is the HTTP transport of model calls. Over plain http:// (a model server of the
// operator's own: vLLM, Ollama, a gateway in the cluster) it speaks HTTP/1.1 itself, with
// no goroutine of its own per connection: Go's transport keeps a read loop and a write loop
// per connection (two goroutines, their stacks, channels and 2 KiB of state), and a streamed
// answer holds its connection for as long as the model writes, so a runtime with many open
// streams paid them per stream. Here the request is written and the answer read on the
// caller's goroutine, a client leaving closes the connection through context.AfterFunc (a
// goroutine only when it fires), and an idle connection is checked for a server's close when
// it is taken, not by a goroutine reading it while it waits.
//
// HTTPS, a request through a proxy (HTTP_PROXY and the like) and what this transport does
// not speak (a body of unknown length, Expect: 100-continue, Upgrade) go to HTTPS, Go's
// transport, which negotiates HTTP/2 where the provider offers it (the OpenAI and Anthropic
// APIs do): there the open streams to a host share a few connections anyway.
//
// It is safe for concurrent use; the zero value is not: use NewTransport.
type Transport struct {
	// HTTPS carries what the HTTP/1.1 path does not (see above).
	HTTPS *http.Transport
	// Timeout bounds a call from its start to the end of its answer's body; 0 for none. It is
	// a timer per call, not the goroutine per request that http.Client.Timeout starts.
	Timeout time.Duration

	dial           func(ctx context.Context, network, addr string) (net.Conn, error)
	maxIdlePerHost int
	idleTimeout    time.Duration
	readBuffer     int
	readers        sync.Pool // of *bufio.Reader: a connection has one only while it reads a head

	mu   sync.Mutex
	idle map[string][]*h1conn // by host:port, the most recently used last
}

// NewTransport returns the transport of model calls: a pool of up to 512 idle connections
// per model host, closed after 90 s unused, 512-byte read buffers (the providers' event
// readers buffer what they read), and HTTPS as Go's default transport with HTTP/1.1 and
// HTTP/2 and 1 KiB connection buffers.
func NewTransport() *Transport {
	std := http.DefaultTransport.(*http.Transport).Clone()
	std.MaxIdleConns = 1024
	std.MaxIdleConnsPerHost = 512
	std.IdleConnTimeout = 90 * time.Second
	std.ReadBufferSize = 1 << 10
	std.WriteBufferSize = 1 << 10
	std.Protocols = new(http.Protocols)
	std.Protocols.SetHTTP1(true)
	std.Protocols.SetHTTP2(true)
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return &Transport{
		HTTPS:          std,
		dial:           d.DialContext,
		maxIdlePerHost: std.MaxIdleConnsPerHost,
		idleTimeout:    std.IdleConnTimeout,
		readBuffer:     512, // an event of a streamed answer is a few hundred bytes; a longer read goes past the buffer
		idle:           map[string][]*h1conn{},
	}
}

// h1conn is one HTTP/1.1 connection of the pool.
type h1conn struct {
	t      *Transport
	key    string
	conn   net.Conn
	br     *bufio.Reader // reads through the h1conn, which counts; from the pool during a call, nil while idle
	nread  int64         // bytes read from conn since the request was written
	reused bool          // served a request before this one
	timer  *time.Timer   // closes the connection once idle too long
}

func (c *h1conn) Read(p []byte) (int, error) {
	n, err := c.conn.Read(p)
	c.nread += int64(n)
	return n, err
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.speaks(req) {
		return t.viaHTTPS(req)
	}
	cancel := context.CancelFunc(func() {})
	if t.Timeout > 0 {
		var ctx context.Context
		ctx, cancel = context.WithTimeout(req.Context(), t.Timeout)
		req = req.WithContext(ctx)
	}
	resp, err := t.roundTrip(req, cancel)
	if err != nil {
		cancel()
	}
	return resp, err
}

// roundTrip sends req over HTTP/1.1; the answer's body calls cancel when it is done.
func (t *Transport) roundTrip(req *http.Request, cancel context.CancelFunc) (*http.Response, error) {
	ctx := req.Context()
	key := req.URL.Host
	if req.URL.Port() == "" {
		key = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	head, err := requestHead(req)
	if err != nil {
		closeBodyOf(req.Body)
		return nil, err
	}
	body := req.Body
	if body == http.NoBody {
		body = nil
	}
	for attempt := 0; ; attempt++ {
		if err := context.Cause(ctx); err != nil {
			closeBodyOf(body)
			return nil, err
		}
		c, err := t.conn(ctx, key)
		if err != nil {
			closeBodyOf(body)
			return nil, err
		}
		resp, retry, err := c.exchange(req, head, body, cancel)
		if err == nil {
			return resp, nil
		}
		if retry && attempt == 0 && ctx.Err() == nil && (body == nil || req.GetBody != nil) {
			// A reused connection the server had closed while idle: once more on a new one.
			if body != nil {
				if body, err = req.GetBody(); err != nil {
					return nil, err
				}
			}
			continue
		}
		if cause := context.Cause(ctx); cause != nil {
			return nil, cause
		}
		return nil, err
	}
}

// speaks reports whether the HTTP/1.1 path serves req.
func (t *Transport) speaks(req *http.Request) bool {
	if req.URL.Scheme != "http" || req.Header.Get("Expect") != "" || req.Header.Get("Upgrade") != "" {
		return false
	}
	if req.Body != nil && req.Body != http.NoBody && req.ContentLength <= 0 {
		return false // of unknown length: chunked upload
	}
	if t.HTTPS.Proxy != nil {
		if u, err := t.HTTPS.Proxy(req); err != nil || u != nil {
			return false
		}
	}
	return true
}

// viaHTTPS sends req through HTTPS, bounded by Timeout.
func (t *Transport) viaHTTPS(req *http.Request) (*http.Response, error) {
	if t.Timeout <= 0 {
		return t.HTTPS.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), t.Timeout)
	resp, err := t.HTTPS.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelBody ends a call's context when its body is read to the end or closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.cancel()
	}
	return n, err
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

func closeBodyOf(body io.ReadCloser) {
	if body != nil {
		_ = body.Close()
	}
}

// requestHead is req's request line and header, ending with the blank line.
func requestHead(req *http.Request) ([]byte, error) {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if !validHeaderValue(host) {
		return nil, fmt.Errorf("models: invalid Host %q", host)
	}
	b := make([]byte, 0, 256)
	b = append(b, req.Method...)
	b = append(b, ' ')
	b = append(b, req.URL.RequestURI()...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\n"...)
	if _, ok := req.Header["User-Agent"]; !ok {
		b = append(b, "User-Agent: Go-http-client/1.1\r\n"...)
	}
	if req.Body != nil && req.Body != http.NoBody || req.Method == http.MethodPost || req.Method == http.MethodPut || req.Method == http.MethodPatch {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, max(req.ContentLength, 0), 10)
		b = append(b, "\r\n"...)
	}
	if req.Close {
		b = append(b, "Connection: close\r\n"...)
	}
	for k, vs := range req.Header {
		switch http.CanonicalHeaderKey(k) {
		case "Host", "Content-Length", "Connection", "Transfer-Encoding":
			continue // the transport's own
		}
		if !validHeaderName(k) {
			return nil, fmt.Errorf("models: invalid header name %q", k)
		}
		for _, v := range vs {
			if !validHeaderValue(v) {
				return nil, fmt.Errorf("models: invalid value of header %s", k)
			}
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	return append(b, "\r\n"...), nil
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || c == ':' {
			return false
		}
	}
	return true
}

func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == '\r' || c == '\n' || c == 0 {
			return false
		}
	}
	return true
}

// smallBody is the largest request body written together with the head, in one write.
const smallBody = 4 << 10

// exchange writes the request, closing body, and reads the answer's head. retry reports a
// failure on a reused connection before any byte of an answer: the server had closed it while
// idle, so the request may go once more on a new connection.
func (c *h1conn) exchange(req *http.Request, head []byte, body io.ReadCloser, cancel context.CancelFunc) (_ *http.Response, retry bool, _ error) {
	ctx := req.Context()
	stop := context.AfterFunc(ctx, func() { c.conn.Close() })
	c.nread = 0
	c.br = c.t.reader(c)
	fail := func(err error) (*http.Response, bool, error) {
		stop()
		c.stopTimer()
		c.conn.Close()
		c.t.putReader(c.br) // no other goroutine reads it: the answer never reached its caller
		c.br = nil
		return nil, c.reused && c.nread == 0, err
	}
	err := c.write(head, body, req.ContentLength)
	if trace := httptrace.ContextClientTrace(ctx); trace != nil && trace.WroteRequest != nil {
		trace.WroteRequest(httptrace.WroteRequestInfo{Err: err})
	}
	if err != nil {
		return fail(err)
	}
	var resp *http.Response
	for {
		resp, err = http.ReadResponse(c.br, req)
		if err != nil {
			return fail(err)
		}
		if resp.StatusCode < 100 || resp.StatusCode > 199 {
			break
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			return fail(errors.New("models: the server switched protocols, which a model call does not ask for"))
		}
		// 1xx: informational; the answer follows.
	}
	chunked := len(resp.TransferEncoding) == 1 && resp.TransferEncoding[0] == "chunked"
	b := &h1body{r: resp.Body, c: c, ctx: ctx, stop: stop, cancel: cancel,
		reusable: !resp.Close && !req.Close && (resp.ContentLength >= 0 || chunked)}
	if resp.Body == http.NoBody {
		b.finish(bodyEnded, b.reusable)
		return resp, false, nil
	}
	if chunked {
		b.d = &dechunker{br: c.br, release: c.t.putReader, conn: c}
		b.r, c.br = b.d, nil
	}
	resp.Body = b
	return resp, false, nil
}

// write sends head and then body, which it closes: together in one write when the body is
// small, else the body straight from its reader (a *bytes.Reader writes itself in one go).
func (c *h1conn) write(head []byte, body io.ReadCloser, n int64) error {
	if body == nil {
		_, err := c.conn.Write(head)
		return err
	}
	defer body.Close()
	if n <= smallBody {
		b := slices.Grow(head, int(n))[:len(head)+int(n)]
		if _, err := io.ReadFull(body, b[len(head):]); err != nil {
			return fmt.Errorf("reading the request body: %w", err)
		}
		_, err := c.conn.Write(b)
		return err
	}
	if _, err := c.conn.Write(head); err != nil {
		return err
	}
	m, err := io.Copy(c.conn, io.LimitReader(body, n))
	if err == nil && m < n {
		err = fmt.Errorf("the request body ended after %d of its %d bytes", m, n)
	}
	return err
}

// The states of an h1body.
const (
	bodyOpen   = iota
	bodyEnded  // read to its end
	bodyClosed // closed before its end, or failed
)

var errBodyClosed = errors.New("models: read on a closed response body")

// h1body is an answer's body on an h1conn: read to its end, the connection goes back to the
// pool; closed before, or failed, the connection is closed. Close may come while a Read
// waits (it closes the connection, which ends the Read).
type h1body struct {
	r        io.Reader  // net/http's body reading through the connection's br, or d
	d        *dechunker // a chunked body's
	c        *h1conn
	ctx      context.Context
	stop     func() bool // of the AfterFunc that closes the connection when ctx ends
	cancel   context.CancelFunc
	reusable bool
	state    atomic.Int32
}

func (b *h1body) Read(p []byte) (int, error) {
	switch b.state.Load() {
	case bodyEnded:
		return 0, io.EOF
	case bodyClosed:
		return 0, errBodyClosed
	}
	n, err := b.r.Read(p)
	switch {
	case err == io.EOF:
		b.finish(bodyEnded, b.reusable && (b.d == nil || b.d.drained()))
	case err != nil:
		b.finish(bodyClosed, false)
		if cause := context.Cause(b.ctx); cause != nil {
			err = cause
		}
	}
	return n, err
}

func (b *h1body) Close() error {
	b.finish(bodyClosed, false)
	return nil
}

// finish lets go of the connection once: back to the pool when keep is true and the call's
// context did not close it. keep is true only on the goroutine that read the body to its end
// (or, for an answer without one, the call's), which alone may give the head's reader back.
func (b *h1body) finish(state int32, keep bool) {
	if !b.state.CompareAndSwap(bodyOpen, state) {
		return
	}
	if !b.stop() {
		keep = false // the AfterFunc closed it
	}
	if keep {
		br := b.c.br
		if b.d != nil {
			br, b.d.br = b.d.br, nil
		}
		b.c.br = nil
		if br != nil {
			if br.Buffered() > 0 {
				keep = false // the server sent what no call asked for
			} else {
				b.c.t.putReader(br)
			}
		}
	}
	b.c.done(keep)
	b.cancel()
}

// reader returns a reader of c's answer's head, from the pool.
func (t *Transport) reader(c *h1conn) *bufio.Reader {
	if br, ok := t.readers.Get().(*bufio.Reader); ok {
		br.Reset(c)
		return br
	}
	return bufio.NewReaderSize(c, t.readBuffer)
}

// putReader gives a head's reader back to the pool.
func (t *Transport) putReader(br *bufio.Reader) {
	br.Reset(nil)
	t.readers.Put(br)
}

// done ends the connection's call: back to the pool, or closed.
func (c *h1conn) done(keep bool) {
	if !keep || !c.t.put(c) {
		c.stopTimer()
		c.conn.Close()
	}
}

func (c *h1conn) stopTimer() {
	if c.timer != nil {
		c.timer.Stop()
	}
}

// conn takes an idle connection to key that is still open, or dials one.
func (t *Transport) conn(ctx context.Context, key string) (*h1conn, error) {
	for {
		c := t.take(key)
		if c == nil {
			break
		}
		if open(c.conn) {
			c.reused = true
			return c, nil
		}
		c.conn.Close() // the server closed it, or sent what no request asked for
	}
	// On a goroutine of its own: a dial goes 2.5 KiB deep into the net package, enough to grow
	// a turn's stack from 8 to 16 KiB, which it then keeps while it waits on the model.
	dialed := make(chan dialResult, 1)
	go func() {
		conn, err := t.dial(ctx, "tcp", key)
		dialed <- dialResult{conn, err}
	}()
	d := <-dialed
	conn, err := d.conn, d.err
	if err != nil {
		return nil, err
	}
	return &h1conn{t: t, key: key, conn: conn}, nil
}

type dialResult struct {
	conn net.Conn
	err  error
}

// take pops key's most recently used idle connection, nil when there is none.
func (t *Transport) take(key string) *h1conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	list := t.idle[key]
	if len(list) == 0 {
		return nil
	}
	c := list[len(list)-1]
	list[len(list)-1] = nil
	t.idle[key] = list[:len(list)-1]
	c.stopTimer()
	return c
}

// put keeps c idle; false when the pool for its host is full.
func (t *Transport) put(c *h1conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.idle == nil || len(t.idle[c.key]) >= t.maxIdlePerHost {
		return false
	}
	t.idle[c.key] = append(t.idle[c.key], c)
	if c.timer == nil {
		c.timer = time.AfterFunc(t.idleTimeout, func() { t.expire(c) })
	} else {
		c.timer.Reset(t.idleTimeout)
	}
	return true
}

// expire closes c if it is still idle.
func (t *Transport) expire(c *h1conn) {
	t.mu.Lock()
	list := t.idle[c.key]
	for i, x := range list {
		if x == c {
			t.idle[c.key] = append(list[:i], list[i+1:]...)
			t.mu.Unlock()
			c.conn.Close()
			return
		}
	}
	t.mu.Unlock()
}

// CloseIdleConnections closes the idle connections of both paths.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = map[string][]*h1conn{}
	t.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			c.stopTimer()
			c.conn.Close()
		}
	}
	t.HTTPS.CloseIdleConnections()
}
