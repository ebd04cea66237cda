package sse

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// ErrClosed is returned by a Writer used after a write failed (the client is gone) or after Close.
var ErrClosed = errors.New("sse: stream closed")

// Writer writes the frames of one SSE response. Each frame is
//
//	id: <n>\ndata: <json>\n\n
//
// with n counting from 1. A Writer is safe for concurrent use; after the first failed write
// every call returns an error wrapping ErrClosed.
//
// Frames are written to the response at once and flushed as produced: synchronously after
// each frame, or — after Coalesce — by a helper goroutine that flushes as soon as it runs, so
// that frames produced faster than one flush per frame share a flush (and a system call)
// instead of each paying for one; the helper ends when nothing is left to flush, so a stream
// waiting for its model holds no goroutine for it. Either way no frame waits for a timer. A done frame, the
// last of a turn, is flushed by the Close or Detach that follows it, so that it shares the
// last system call of the response.
type Writer struct {
	mu   sync.Mutex
	w    http.ResponseWriter
	dst  Dest    // the response, or where Move moved the stream
	buf  []byte  // the frame being written, in *bufp
	bufp *[]byte // from frameBufs while a frame is written, else nil
	seq  int64
	err  error
	ts   stampCache

	coalesce bool // Coalesce was called
	flushing bool // a flusher goroutine runs
	pending  bool // frames written since the flusher's last flush
	wg       sync.WaitGroup

	// Now stamps frames without a Time; nil means time.Now. Set it before the first frame.
	Now func() time.Time
	// Tee, when set, receives the id and the JSON of every frame Write writes, before it is
	// sent (the per-turn log of reattach). data is only valid during the call. Set it before
	// the first frame.
	Tee func(id int64, data []byte)
}

// Dest is where a Writer's stream goes: Write takes the bytes of a frame, Flush sends them.
type Dest interface {
	Write(p []byte) (int, error)
	Flush() error
}

// response is the Dest of an HTTP response.
type response struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (r response) Write(p []byte) (int, error) { return r.w.Write(p) }
func (r response) Flush() error                { return r.rc.Flush() }

// NewWriter returns a Writer over w. It writes nothing until Start or the first frame.
func NewWriter(w http.ResponseWriter) *Writer {
	return &Writer{w: w, dst: response{w, http.NewResponseController(w)}}
}

// Move flushes what is written to the response and sends the rest of the stream to the Dest
// that to returns (a parked connection, which to takes from the response once it is flushed).
// When to fails, the stream stays where it was.
func (sw *Writer) Move(to func() (Dest, error)) error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.err != nil {
		return sw.err
	}
	if err := sw.flushLocked(); err != nil {
		return err
	}
	d, err := to()
	if err != nil {
		return err
	}
	sw.dst, sw.w = d, nil
	return nil
}

// Start sets the response headers of an event stream, writes the status line and flushes
// (after Coalesce: has it flushed), so the client sees the stream open before the first frame. Extra headers must be set on the
// ResponseWriter before Start.
func (sw *Writer) Start() error {
	h := sw.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.w.WriteHeader(http.StatusOK)
	if sw.coalesce {
		sw.kickLocked() // the flusher sends the headers, with the first frame when it is already there
		return nil
	}
	return sw.flushLocked()
}

// Coalesce hands flushing to a helper goroutine (see Writer), started when a frame is
// written and gone once nothing is left to flush, so that an idle stream holds none. Close or
// Detach must be called before the handler returns; they wait for the helper.
func (sw *Writer) Coalesce() {
	sw.mu.Lock()
	sw.coalesce = true
	sw.mu.Unlock()
}

// flusher flushes until no frame is pending.
func (sw *Writer) flusher() {
	defer sw.wg.Done()
	sw.mu.Lock()
	defer sw.mu.Unlock()
	for sw.pending && sw.err == nil && sw.coalesce {
		sw.pending = false
		_ = sw.flushLocked() // recorded in sw.err for the next Write
	}
	sw.flushing = false
}

// Close flushes what is written, waits for the flusher of Coalesce, if any. Later writes fail
// with ErrClosed. It returns the first write or flush error, if any.
func (sw *Writer) Close() error {
	sw.stopFlusher()
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.err != nil {
		return sw.err
	}
	err := sw.flushLocked()
	if err == nil {
		sw.err = ErrClosed
	}
	return err
}

// stopFlusher makes a running flusher of Coalesce stop after its current flush and waits
// for it.
func (sw *Writer) stopFlusher() {
	sw.mu.Lock()
	sw.coalesce = false
	sw.mu.Unlock()
	sw.wg.Wait()
}

// Detach is Close for a handler about to return: it stops the flusher of Coalesce and makes
// later writes fail with ErrClosed, but leaves what is written to the HTTP server, which
// flushes it together with the end of the response when the handler returns — one system
// call instead of two. It returns the first write or flush error, if any.
func (sw *Writer) Detach() error {
	sw.stopFlusher()
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.err != nil {
		return sw.err
	}
	sw.err = ErrClosed
	return nil
}

// Write encodes f and writes it as one event.
func (sw *Writer) Write(f *Frame) error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.err != nil {
		return sw.err
	}
	sw.begin()
	start := len(sw.buf)
	sw.buf = appendFrame(sw.buf, f, sw.stamp(f))
	if sw.Tee != nil {
		sw.Tee(sw.seq, sw.buf[start:])
	}
	sw.buf = append(sw.buf, '\n', '\n')
	if f.Type == TypeDone && sw.coalesce {
		return sw.writeLocked() // the last frame: Close or Detach, which follow, flush it
	}
	return sw.sendLocked()
}

// WriteData writes data (one line of JSON or a sentinel such as [DONE]) as one event.
func (sw *Writer) WriteData(data []byte) error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.err != nil {
		return sw.err
	}
	sw.begin()
	sw.buf = append(sw.buf, data...)
	sw.buf = append(sw.buf, '\n', '\n')
	return sw.sendLocked()
}

// WriteEvent writes data as one event of the given id, for a replay of frames numbered
// elsewhere (the per-turn log). Later frames of Write count on from id.
func (sw *Writer) WriteEvent(id int64, data []byte) error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.err != nil {
		return sw.err
	}
	sw.seq = id - 1
	sw.begin()
	sw.buf = append(sw.buf, data...)
	sw.buf = append(sw.buf, '\n', '\n')
	return sw.sendLocked()
}

// Comment writes an SSE comment line (": text"), which clients ignore; it keeps idle
// connections open through proxies.
func (sw *Writer) Comment(text string) error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.err != nil {
		return sw.err
	}
	sw.takeBuf()
	sw.buf = append(sw.buf, ':', ' ')
	sw.buf = append(sw.buf, text...)
	sw.buf = append(sw.buf, '\n', '\n')
	return sw.sendLocked()
}

// Seq is the id of the last frame written.
func (sw *Writer) Seq() int64 {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.seq
}

// stamp returns the encoded timestamp of f: its Time, or now (cached per millisecond).
func (sw *Writer) stamp(f *Frame) []byte {
	if !f.Time.IsZero() {
		return AppendTimestamp(sw.ts.scratch[:0], f.Time)
	}
	now := time.Now
	if sw.Now != nil {
		now = sw.Now
	}
	return sw.ts.get(now())
}

func (sw *Writer) begin() {
	sw.seq++
	sw.takeBuf()
	b := append(sw.buf, "id: "...)
	b = strconv.AppendInt(b, sw.seq, 10)
	sw.buf = append(b, "\ndata: "...)
}

func (sw *Writer) sendLocked() error {
	if err := sw.writeLocked(); err != nil {
		return err
	}
	if sw.coalesce {
		sw.kickLocked()
		return nil
	}
	return sw.flushLocked()
}

// writeLocked writes the frame in sw.buf to the response without flushing it.
func (sw *Writer) writeLocked() error {
	_, err := sw.dst.Write(sw.buf)
	sw.releaseBuf()
	if err != nil {
		sw.err = fmt.Errorf("%w: %w", ErrClosed, err)
		return sw.err
	}
	return nil
}

// frameBufs hold frames while they are written: a buffer of each stream's own would be 512
// bytes more for each stream waiting on its model.
var frameBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// takeBuf gives sw an empty buffer for the next frame.
func (sw *Writer) takeBuf() {
	if sw.bufp == nil {
		sw.bufp = frameBufs.Get().(*[]byte)
	}
	sw.buf = (*sw.bufp)[:0]
}

// releaseBuf gives sw's buffer back, unless one huge frame grew it too large to keep.
func (sw *Writer) releaseBuf() {
	if sw.bufp != nil && cap(sw.buf) <= 64<<10 {
		*sw.bufp = sw.buf[:0]
		frameBufs.Put(sw.bufp)
	}
	sw.buf, sw.bufp = nil, nil
}

// kickLocked has the flusher of Coalesce flush, starting it when none runs.
func (sw *Writer) kickLocked() {
	sw.pending = true
	if !sw.flushing {
		sw.flushing = true
		sw.wg.Add(1)
		go sw.flusher()
	}
}

func (sw *Writer) flushLocked() error {
	if err := sw.dst.Flush(); err != nil {
		sw.err = fmt.Errorf("%w: %w", ErrClosed, err)
		return sw.err
	}
	return nil
}

// stampCache keeps the encoding of the last millisecond stamped.
type stampCache struct {
	ms      int64
	b       []byte
	scratch [32]byte
}

func (c *stampCache) get(t time.Time) []byte {
	ms := t.UnixMilli()
	if c.b == nil || ms != c.ms {
		c.ms = ms
		c.b = AppendTimestamp(c.b[:0], t)
	}
	return c.b
}
