// Package redisstream keeps the per-turn frame logs of streams in Redis streams, shared by the
// runners of a scale-out, so that any runner serves a reconnect, and carries stops to the
// runner that holds a turn over Redis pub/sub.
//
// The log of a session's last turn is the stream <prefix>log:<session>: an opening entry 0-1
// naming the turn, then one entry per batch of frames, <n>-0 where n is the batch's last frame
// (field f: the frames, each its id and length as uvarints then its JSON), and the done mark
// (field done) in the last batch, or alone as the entry <n>-1 (0-2 without frames). A reader
// after frame a reads from a-0: the batch ending with frame a (for its done mark), the one
// holding frame a+1 and those after, skipping the frames up to a. A running turn's stream expires about RunningTTL after its last
// write (a runner that dies mid-turn leaves no log behind for long, and its readers end); the
// done mark sets Retention.
package redisstream

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/runner/streams"
)

// Defaults of Config.
const (
	DefaultPrefix     = "svc:turnlog:"
	DefaultRunningTTL = 30 * time.Minute
	DefaultBlock      = 15 * time.Second
	DefaultLinger     = 10 * time.Millisecond
)

// maxBatch is the size of a pending batch that goes to Redis without waiting for Linger.
const maxBatch = 64 << 10

// Config configures a Log. Redis is required.
type Config struct {
	Redis redis.UniversalClient
	// Prefix starts every key and the stop channel; "" means DefaultPrefix.
	Prefix string
	// Retention keeps a log after its turn ended; 0 means streams.Retention.
	Retention time.Duration
	// RunningTTL expires the log of a running turn that wrote nothing for this long (its
	// runner died); 0 means DefaultRunningTTL.
	RunningTTL time.Duration
	// Block bounds one wait of a following Read; 0 means DefaultBlock.
	Block time.Duration
	// Linger is how long a turn's first frame not yet in Redis waits for more to share its
	// write (one command and round trip per batch instead of per frame); a follower on
	// another runner sees frames up to Linger late, the live client not at all, and the last
	// frames go at the turn's end. 0 means DefaultLinger.
	Linger time.Duration
	Logger *slog.Logger
}

// Log is a streams log in Redis. Create it with New; Close ends its stop subscription.
type Log struct {
	cfg   Config
	sub   *redis.PubSub
	mu    sync.Mutex
	stops map[string]stopEntry // the running turns of this process, by session
	wg    sync.WaitGroup
}

type stopEntry struct {
	turn string
	stop func()
}

// New returns a Log of cfg, subscribed to the stops of every process.
func New(ctx context.Context, cfg Config) (*Log, error) {
	if cfg.Redis == nil {
		return nil, errors.New("redisstream: Config.Redis is required")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.Retention <= 0 {
		cfg.Retention = streams.Retention
	}
	if cfg.RunningTTL <= 0 {
		cfg.RunningTTL = DefaultRunningTTL
	}
	if cfg.Block <= 0 {
		cfg.Block = DefaultBlock
	}
	if cfg.Linger <= 0 {
		cfg.Linger = DefaultLinger
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	l := &Log{cfg: cfg, stops: map[string]stopEntry{}}
	l.sub = cfg.Redis.Subscribe(ctx, l.channel())
	if _, err := l.sub.Receive(ctx); err != nil { // the subscription's confirmation
		_ = l.sub.Close() // the error that matters is Receive's
		return nil, fmt.Errorf("redisstream: subscribe: %w", err)
	}
	l.wg.Add(1)
	go l.listen()
	return l, nil
}

func (l *Log) channel() string           { return l.cfg.Prefix + "stop" }
func (l *Log) key(session string) string { return l.cfg.Prefix + "log:" + session }

// Close ends the stop subscription and waits for its listener.
func (l *Log) Close() error {
	err := l.sub.Close()
	l.wg.Wait()
	return err
}

func (l *Log) listen() {
	defer l.wg.Done()
	for m := range l.sub.Channel() {
		l.stopLocal(m.Payload)
	}
}

// stopLocal stops the turn of session when this process runs it.
func (l *Log) stopLocal(session string) bool {
	l.mu.Lock()
	e, ok := l.stops[session]
	l.mu.Unlock()
	if ok && e.stop != nil {
		e.stop()
	}
	return ok
}

// Open starts the log of a new turn of session (streams.Writer batches its frames).
func (l *Log) Open(ctx context.Context, session string, stop func()) (streams.Writer, error) {
	turn := newTurnID()
	key := l.key(session)
	_, err := l.cfg.Redis.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, key)
		p.XAdd(ctx, &redis.XAddArgs{Stream: key, ID: "0-1", Values: []any{"turn", turn}})
		p.Expire(ctx, key, l.cfg.RunningTTL)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisstream: open: %w", err)
	}
	l.mu.Lock()
	l.stops[session] = stopEntry{turn: turn, stop: stop}
	l.mu.Unlock()
	w := &writer{l: l, session: session, turn: turn, key: key, expiredAt: time.Now()}
	w.cond.L = &w.mu
	return w, nil
}

// Read implements the reads of streams logs (see runtime.TurnLog).
func (l *Log) Read(ctx context.Context, session, turn string, after int64) (streams.Batch, error) {
	key := l.key(session)
	var head, tail *redis.XMessageSliceCmd
	_, err := l.cfg.Redis.Pipelined(ctx, func(p redis.Pipeliner) error {
		head = p.XRangeN(ctx, key, "0-1", "0-1", 1)
		tail = p.XRange(ctx, key, strconv.FormatInt(after, 10)+"-0", "+")
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return streams.Batch{}, fmt.Errorf("redisstream: read: %w", err)
	}
	if len(head.Val()) == 0 {
		return streams.Batch{}, streams.ErrNoTurn
	}
	current, _ := head.Val()[0].Values["turn"].(string)
	if turn != "" && current != turn {
		return streams.Batch{Turn: current, Done: true}, nil
	}
	b := streams.Batch{Turn: current}
	last := l.collect(&b, tail.Val(), after)
	if len(b.Entries) > 0 || b.Done || turn == "" {
		return b, nil
	}
	// Follow: wait for the next entry, within Block.
	res, err := l.cfg.Redis.XRead(ctx, &redis.XReadArgs{Streams: []string{key, last}, Block: l.cfg.Block}).Result()
	switch {
	case errors.Is(err, redis.Nil):
		if n, err := l.cfg.Redis.Exists(ctx, key).Result(); err == nil && n == 0 {
			return streams.Batch{}, streams.ErrNoTurn // expired: its runner died before done
		}
		return b, nil
	case err != nil:
		if ctx.Err() != nil {
			return streams.Batch{}, ctx.Err()
		}
		return streams.Batch{}, fmt.Errorf("redisstream: read: %w", err)
	}
	for _, s := range res {
		l.collect(&b, s.Messages, after)
	}
	return b, nil
}

// collect adds the frames of msgs after id after to b, and the end; it returns the id of the
// last entry seen, for XREAD.
func (l *Log) collect(b *streams.Batch, msgs []redis.XMessage, after int64) string {
	last := strconv.FormatInt(after, 10) + "-0"
	if after == 0 {
		last = "0-1"
	}
	for _, m := range msgs {
		last = m.ID
		if f, ok := m.Values["f"].(string); ok {
			b.Entries = decodeFrames(b.Entries, f, after)
		}
		if m.Values["done"] != nil {
			b.Done = true
		}
	}
	return last
}

// Stop publishes a stop of the session's running turn to every process. It reports whether
// a turn was running (its log has no done entry).
func (l *Log) Stop(ctx context.Context, session string) (bool, error) {
	msgs, err := l.cfg.Redis.XRevRangeN(ctx, l.key(session), "+", "-", 1).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("redisstream: stop: %w", err)
	}
	if len(msgs) == 0 || msgs[0].Values["done"] != nil {
		return false, nil
	}
	if l.stopLocal(session) {
		return true, nil
	}
	if err := l.cfg.Redis.Publish(ctx, l.channel(), session).Err(); err != nil {
		return false, fmt.Errorf("redisstream: stop: %w", err)
	}
	return true, nil
}

var _ streams.Writer = (*writer)(nil)

// writer is the streams.Writer of one turn. Append encodes a frame into the pending batch and
// arms a timer of Linger; when it fires, the batch goes to Redis as one entry (off the turn's
// goroutine: the turn never waits for Redis while it runs). Close cancels a pending timer and
// writes the rest with the done mark, in the same entry when frames are left, before it
// returns: the live client's done frame is sent after Close, so a client that saw done finds
// the whole turn in Redis.
type writer struct {
	l       *Log
	session string
	turn    string
	key     string

	mu      sync.Mutex
	cond    sync.Cond // signalled when armed goes false
	pending []byte    // encoded frames not yet sent (see appendFrame)
	spare   []byte
	last    int64 // id of the last frame appended
	closed  bool
	armed   bool // the timer is set or its flush runs
	timer   *time.Timer
	// expiredAt is when the key's expiry was last pushed back; sends are serial (the flush,
	// then Close), so it needs no lock.
	expiredAt time.Time
}

// Append implements streams.Writer.
func (w *writer) Append(id int64, data []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || id <= w.last {
		return
	}
	w.last = id
	w.pending = appendFrame(w.pending, id, data)
	switch {
	case !w.armed:
		w.armed = true
		if w.timer == nil {
			w.timer = time.AfterFunc(w.linger(), w.flush)
		} else {
			w.timer.Reset(w.linger())
		}
	case len(w.pending) >= maxBatch && w.timer.Stop():
		w.timer.Reset(0) // a full batch goes at once; a running flush re-arms with linger
	}
}

// linger is the wait of the pending batch: Linger, none when it is full.
func (w *writer) linger() time.Duration {
	if len(w.pending) >= maxBatch {
		return 0
	}
	return w.l.cfg.Linger
}

// flush, the timer's function, sends the pending batch; frames appended meanwhile re-arm the
// timer.
func (w *writer) flush() {
	w.mu.Lock()
	batch, last := w.pending, w.last
	w.pending, w.spare = w.spare[:0], nil
	w.mu.Unlock()
	if len(batch) > 0 {
		w.send(batch, last, false)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.spare = batch[:0]
	if len(w.pending) > 0 && !w.closed {
		w.timer.Reset(w.linger())
		return
	}
	w.armed = false
	w.cond.Broadcast()
}

// send writes the frames of batch, whose last is last, as one entry <last>-0, and the done
// mark when done: in that entry, or without frames as the entry <last>-1 (0-2 when the turn
// had none).
func (w *writer) send(batch []byte, last int64, done bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var args redis.XAddArgs
	args.Stream = w.key
	switch {
	case len(batch) > 0 && done:
		args.ID, args.Values = strconv.FormatInt(last, 10)+"-0", []any{"f", batch, "done", "1"}
	case len(batch) > 0:
		args.ID, args.Values = strconv.FormatInt(last, 10)+"-0", []any{"f", batch}
	case last == 0:
		args.ID, args.Values = "0-2", []any{"done", "1"} // after the opening entry
	default:
		args.ID, args.Values = strconv.FormatInt(last, 10)+"-1", []any{"done", "1"}
	}
	var ttl time.Duration
	switch {
	case done:
		ttl = w.l.cfg.Retention
	case time.Since(w.expiredAt) > w.l.cfg.RunningTTL/10:
		// A running turn's key expires RunningTTL after its last write, give or take a
		// tenth: pushed back now and then, not with every batch.
		w.expiredAt = time.Now()
		ttl = w.l.cfg.RunningTTL
	}
	var err error
	if ttl == 0 {
		err = w.l.cfg.Redis.XAdd(ctx, &args).Err()
	} else {
		_, err = w.l.cfg.Redis.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.XAdd(ctx, &args)
			p.Expire(ctx, w.key, ttl)
			return nil
		})
	}
	if err != nil {
		// A reconnect misses these frames (or a new turn replaced the log); the turn goes on.
		w.l.cfg.Logger.Warn("write a turn's frames to Redis", "session_id", w.session, "bytes", len(batch), "done", done, "err", err)
	}
}

// Close implements streams.Writer: it cancels the timer or waits for its flush, then writes
// the rest and the done mark, and forgets the turn's stop.
func (w *writer) Close() {
	w.mu.Lock()
	w.closed = true
	if w.armed && w.timer.Stop() {
		w.armed = false
	}
	for w.armed {
		w.cond.Wait()
	}
	rest, last := w.pending, w.last
	w.pending = nil
	w.mu.Unlock()
	w.send(rest, last, true)
	w.l.mu.Lock()
	if e, ok := w.l.stops[w.session]; ok && e.turn == w.turn {
		delete(w.l.stops, w.session)
	}
	w.l.mu.Unlock()
}

// appendFrame encodes a frame of a batch: its id and its length as uvarints, then its JSON.
func appendFrame(b []byte, id int64, data []byte) []byte {
	b = binary.AppendUvarint(b, uint64(id))
	b = binary.AppendUvarint(b, uint64(len(data)))
	return append(b, data...)
}

// decodeFrames appends the frames of batch b with ids above after to es; the entries' data
// share one copy of b. A malformed batch ends the decoding.
func decodeFrames(es []streams.Entry, b string, after int64) []streams.Entry {
	var buf []byte
	for len(b) > 0 {
		id, n := uvarint(b)
		if n <= 0 {
			return es
		}
		b = b[n:]
		size, n := uvarint(b)
		if n <= 0 || uint64(len(b)-n) < size {
			return es
		}
		data := b[n : n+int(size)]
		b = b[n+int(size):]
		if int64(id) <= after {
			continue
		}
		if buf == nil {
			buf = make([]byte, 0, len(data)+len(b))
		}
		start := len(buf)
		buf = append(buf, data...)
		es = append(es, streams.Entry{ID: int64(id), Data: buf[start:len(buf):len(buf)]})
	}
	return es
}

// uvarint is binary.Uvarint of a string.
func uvarint(s string) (uint64, int) {
	var x uint64
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		c := s[i]
		if c < 0x80 {
			return x | uint64(c)<<(7*i), i + 1
		}
		x |= uint64(c&0x7f) << (7 * i)
	}
	return 0, -1
}

func newTurnID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail (Go 1.24)
	return hex.EncodeToString(b[:])
}
