// Package park takes a long streamed HTTP/1.1 response off net/http's connection while it
// waits, so that an open stream holds less memory: a stream still running after a while is
// parked, its connection hijacked from the server, which lets go of the serve goroutine, its
// 4 KiB reader, 4 KiB writer and 2 KiB chunk buffer, its background read and the request's
// objects. The stream goes on writing chunks to the raw connection; one epoll instance for the
// process (watch_linux.go), or elsewhere a single-byte read, watches for the client leaving. When the stream ends, the chunked body is terminated and the
// connection given back to the server through its Listener, which serves its next request as
// net/http serves a keep-alive connection: a client that sends its turns one after another on
// one connection sees no difference.
//
// A connection is parked only when it was accepted by a Listener (its ConnContext set on the
// server), speaks HTTP/1.1 without TLS and without Connection: close; other streams run the
// same way but stay with net/http.
package park

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Listener is a net.Listener whose Accept also returns the connections of parked streams once
// they end, so that the server reads their next request. Set ConnContext on the http.Server
// that serves it.
type Listener struct {
	net.Listener

	back     chan net.Conn
	accepted chan accepted
	done     chan struct{}
	start    sync.Once
	close    sync.Once

	mu     sync.Mutex
	parked map[*Conn]struct{}
	idle   chan struct{} // closed when parked becomes empty, for Shutdown; nil while none waits
}

type accepted struct {
	c   net.Conn
	err error
}

// NewListener wraps ln.
func NewListener(ln net.Listener) *Listener {
	return &Listener{
		Listener: ln,
		back:     make(chan net.Conn),
		accepted: make(chan accepted),
		done:     make(chan struct{}),
		parked:   map[*Conn]struct{}{},
	}
}

type listenerKey struct{}

// ConnContext is the http.Server's ConnContext: it lets the streams of c find the Listener.
func (l *Listener) ConnContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, listenerKey{}, l)
}

// Accept returns the next new connection, or a parked one given back.
func (l *Listener) Accept() (net.Conn, error) {
	l.start.Do(func() { go l.acceptLoop() })
	select {
	case c := <-l.back:
		return c, nil
	case a := <-l.accepted:
		return a.c, a.err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// acceptLoop hands the wrapped listener's results to Accept until Close: errors too, which
// the server judges (it retries a temporary one).
func (l *Listener) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		select {
		case l.accepted <- accepted{c, err}:
		case <-l.done:
			if c != nil {
				_ = c.Close()
			}
			return
		}
		if errors.Is(err, net.ErrClosed) {
			return
		}
	}
}

// Close closes the wrapped listener; connections given back later are closed.
func (l *Listener) Close() error {
	l.close.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// giveBack has the server serve c again, or closes it once the listener is closed.
func (l *Listener) giveBack(c net.Conn) {
	select {
	case l.back <- c:
	case <-l.done:
		_ = c.Close()
	}
}

// Shutdown waits for the parked streams to end, as http.Server.Shutdown waits for active
// connections; when ctx ends first it closes their connections (the streams see their client
// gone) and returns ctx's error.
func (l *Listener) Shutdown(ctx context.Context) error {
	for {
		l.mu.Lock()
		if len(l.parked) == 0 {
			l.mu.Unlock()
			return nil
		}
		if l.idle == nil {
			l.idle = make(chan struct{})
		}
		idle := l.idle
		l.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			l.mu.Lock()
			for c := range l.parked {
				if c.conn == nil {
					continue // being parked: the stream's write or finish sees the closed listener
				}
				_ = c.conn.Close()
				c.mu.Lock()
				c.leftNow() // the poller sees nothing of a connection closed here
				c.mu.Unlock()
			}
			l.mu.Unlock()
			return ctx.Err()
		}
	}
}

func (l *Listener) add(c *Conn) {
	l.mu.Lock()
	l.parked[c] = struct{}{}
	l.mu.Unlock()
}

func (l *Listener) remove(c *Conn) {
	l.mu.Lock()
	delete(l.parked, c)
	if len(l.parked) == 0 && l.idle != nil {
		close(l.idle)
		l.idle = nil
	}
	l.mu.Unlock()
}

// Stream is one streamed response that may be parked.
type Stream struct {
	w http.ResponseWriter
	r *http.Request
	l *Listener // nil: the stream cannot be parked

	mu     sync.Mutex
	ended  bool
	parked *Conn
}

// Begin returns the Stream of the response w to r.
func Begin(w http.ResponseWriter, r *http.Request) *Stream {
	s := &Stream{w: w, r: r}
	if l, ok := r.Context().Value(listenerKey{}).(*Listener); ok && r.ProtoMajor == 1 && r.ProtoMinor >= 1 && !r.Close && r.TLS == nil {
		s.l = l
	}
	return s
}

// Run runs body on a goroutine of its own and returns when it ends, or, when it is still
// running after the stream has waited for after (and the stream is parkable), once it has
// parked it: move is called to flush what is written to the response and to redirect the
// stream's writes to the parked connection it is given (an error leaves the stream where it
// was). gone is called, once at most, when the client leaves while body runs. A negative after
// never parks.
func (s *Stream) Run(after time.Duration, move func(to func() (*Conn, error)) error, gone func(), body func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		body()
		s.mu.Lock()
		s.ended = true
		c := s.parked
		s.mu.Unlock()
		if c != nil {
			c.finish()
		}
	}()
	var wait <-chan time.Time
	if s.l != nil && after >= 0 {
		t := time.NewTimer(after)
		defer t.Stop()
		wait = t.C
	}
	select {
	case <-done:
		return
	case <-s.r.Context().Done(): // the client left (or the server closed the connection)
		gone()
		<-done
		return
	case <-wait:
	}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		<-done
		return
	}
	// c is in the listener's set before the connection leaves the server, so that a
	// Shutdown between the two does not miss it.
	c := &Conn{l: s.l, gone: gone, watched: make(chan struct{})}
	s.l.add(c)
	err := move(func() (*Conn, error) {
		conn, brw, err := http.NewResponseController(s.w).Hijack()
		if err != nil {
			return nil, err
		}
		c.attach(conn, brw.Reader)
		return c, nil
	})
	if err != nil { // the stream stays with net/http
		s.l.remove(c)
		s.mu.Unlock()
		select {
		case <-done:
		case <-s.r.Context().Done():
			gone()
			<-done
		}
		return
	}
	s.parked = c
	s.w, s.r = nil, nil // the server's response and connection, now garbage but for these
	c.startWatch()      // before the body's end can finish c
	s.mu.Unlock()
}

// Conn is a parked stream's connection: Write buffers one chunk of the chunked body, Flush
// sends what is buffered. Its methods are not safe for concurrent use (the SSE writer
// serialises them).
type Conn struct {
	l    *Listener
	conn net.Conn
	buf  *[]byte // from chunkBufs between a Write and its Flush, else nil
	head []byte  // bytes the server had read ahead of the stream's request, and a byte watch read
	err  error
	gone func()

	watched chan struct{} // closed when readWatch returns
	polled  uint64        // the connection's id in the shared poller (watch_linux.go), 0 if none
	mu      sync.Mutex
	lost    bool // the client left (the watch saw the connection end)
	stop    bool // finish is stopping readWatch
}

// attach gives c the hijacked connection, with what the server had read ahead of it.
func (c *Conn) attach(conn net.Conn, r *bufio.Reader) {
	if n := r.Buffered(); n > 0 {
		c.head, _ = r.Peek(n)
		c.head = append([]byte(nil), c.head...)
	}
	c.l.mu.Lock() // Shutdown reads conn under it
	c.conn = conn
	c.l.mu.Unlock()
}

// chunkBufs hold the chunks written between a Write and its Flush: a buffer of each parked
// stream's own would be 512 bytes more for each stream waiting on its model.
var chunkBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// Write buffers p as one chunk.
func (c *Conn) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if len(p) == 0 {
		return 0, nil // an empty chunk would end the body
	}
	if c.buf == nil {
		c.buf = chunkBufs.Get().(*[]byte)
	}
	b := strconv.AppendInt(*c.buf, int64(len(p)), 16)
	b = append(b, '\r', '\n')
	b = append(b, p...)
	*c.buf = append(b, '\r', '\n')
	return len(p), nil
}

// Flush sends the buffered chunks.
func (c *Conn) Flush() error {
	if c.err != nil {
		return c.err
	}
	if c.buf == nil {
		return nil
	}
	_, c.err = c.conn.Write(*c.buf)
	c.releaseBuf()
	return c.err
}

// releaseBuf gives c's buffer back, unless a burst of frames grew it too large to keep.
func (c *Conn) releaseBuf() {
	if c.buf == nil {
		return
	}
	if cap(*c.buf) <= 4<<10 {
		*c.buf = (*c.buf)[:0]
		chunkBufs.Put(c.buf)
	}
	c.buf = nil
}

// startWatch watches for the client leaving: on Linux with the shared poller, which holds no
// goroutine per connection, else (or when the poller cannot take the connection) with a
// goroutine's read, readWatch.
func (c *Conn) startWatch() {
	if noPoller || !pollWatch(c) {
		go c.readWatch()
	}
}

// noPoller has every connection watched by readWatch (a test's switch).
var noPoller bool

// stopWatch ends the watch; c.lost is then final.
func (c *Conn) stopWatch() {
	if c.polled != 0 {
		pollUnwatch(c)
		return
	}
	c.mu.Lock()
	c.stop = true
	c.mu.Unlock()
	_ = c.conn.SetReadDeadline(time.Unix(1, 0))
	<-c.watched
	_ = c.conn.SetReadDeadline(time.Time{})
}

// leftNow records that the client left and says so to the stream, once. c.mu is held.
func (c *Conn) leftNow() {
	if c.lost {
		return
	}
	c.lost = true
	if c.gone != nil {
		c.gone()
	}
}

// readWatch reads the connection until it ends (the client left) or finish stops it. A client
// does not send while its response streams; a byte that comes all the same is the next
// request, kept for the server.
func (c *Conn) readWatch() {
	defer close(c.watched)
	var b [1]byte
	n, err := c.conn.Read(b[:])
	c.mu.Lock()
	defer c.mu.Unlock()
	if n == 1 {
		c.head = append(c.head, b[0])
		return
	}
	if c.stop && isTimeout(err) {
		return // finish's deadline: the connection is fine
	}
	c.leftNow()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// finish ends the chunked body after what is buffered, stops watch, and gives the connection
// back to the server, or closes it when the client left or a write failed.
func (c *Conn) finish() {
	defer c.l.remove(c)
	if c.err == nil {
		if c.buf == nil {
			c.buf = chunkBufs.Get().(*[]byte)
		}
		*c.buf = append(*c.buf, "0\r\n\r\n"...)
		_, c.err = c.conn.Write(*c.buf)
	}
	c.releaseBuf()
	c.stopWatch()
	c.mu.Lock()
	lost := c.lost
	c.mu.Unlock()
	if c.err != nil || lost {
		_ = c.conn.Close()
		return
	}
	if len(c.head) > 0 {
		c.l.giveBack(&headConn{Conn: c.conn, head: c.head})
		return
	}
	c.l.giveBack(c.conn)
}

// headConn is a connection whose first bytes were read already.
type headConn struct {
	net.Conn
	head []byte
}

func (h *headConn) Read(p []byte) (int, error) {
	if len(h.head) > 0 {
		n := copy(p, h.head)
		h.head = h.head[n:]
		return n, nil
	}
	return h.Conn.Read(p)
}

var _ io.Writer = (*Conn)(nil)
