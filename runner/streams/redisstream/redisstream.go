// Package redisstream keeps the per-turn frame logs of streams in Redis streams, shared by the
// runners of a scale-out, so that any runner serves a reconnect, and carries stops to the
// runner that holds a turn over Redis pub/sub.
//
// The log of a session's last turn is the stream <prefix>log:<session>: an opening entry 0-1
// naming the turn, frame n as entry n-0 (field d: its JSON), and after the last frame n a done
// entry n-1 (0-2 without frames). A running turn's stream expires about RunningTTL after its last write (a runner that
// dies mid-turn leaves no log behind for long, and its readers end); the done entry sets
// Retention.
package redisstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
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
)

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
	Block  time.Duration
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
	return &writer{l: l, session: session, turn: turn, key: key, expiredAt: time.Now()}, nil
}

// Read implements the reads of streams logs (see runtime.TurnLog).
func (l *Log) Read(ctx context.Context, session, turn string, after int64) (streams.Batch, error) {
	key := l.key(session)
	var head, tail *redis.XMessageSliceCmd
	_, err := l.cfg.Redis.Pipelined(ctx, func(p redis.Pipeliner) error {
		head = p.XRangeN(ctx, key, "0-1", "0-1", 1)
		tail = p.XRange(ctx, key, strconv.FormatInt(after, 10)+"-1", "+")
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
		ms, seq, _ := strings.Cut(m.ID, "-")
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil {
			continue
		}
		last = m.ID
		switch {
		case m.Values["done"] != nil:
			b.Done = true
		case seq == "0" && n > after:
			d, _ := m.Values["d"].(string)
			b.Entries = append(b.Entries, streams.Entry{ID: n, Data: []byte(d)})
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

// writer is the streams.Writer of one turn. Append queues a frame; a flusher goroutine,
// started when frames are queued and gone when none are left, sends the queue in one pipeline,
// so that the turn never waits for Redis and frames produced during a round trip share the
// next one.
type writer struct {
	l       *Log
	session string
	turn    string
	key     string

	mu       sync.Mutex
	queue    []streams.Entry
	spare    []streams.Entry
	flushing bool
	last     int64
	closed   bool
	wg       sync.WaitGroup
	// expiredAt is when the key's expiry was last pushed back; sends are serial (the flusher,
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
	w.queue = append(w.queue, streams.Entry{ID: id, Data: append([]byte(nil), data...)})
	if !w.flushing {
		w.flushing = true
		w.wg.Add(1)
		go w.flusher()
	}
}

func (w *writer) flusher() {
	defer w.wg.Done()
	for {
		w.mu.Lock()
		batch := w.queue
		if len(batch) == 0 {
			w.flushing = false
			w.mu.Unlock()
			return
		}
		w.queue, w.spare = w.spare[:0], nil
		w.mu.Unlock()
		w.send(batch, false)
		w.mu.Lock()
		w.spare = batch[:0]
		w.mu.Unlock()
	}
}

// send writes batch, and the done entry when done, in one pipeline.
func (w *writer) send(batch []streams.Entry, done bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := w.l.cfg.Redis.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, e := range batch {
			p.XAdd(ctx, &redis.XAddArgs{Stream: w.key, ID: strconv.FormatInt(e.ID, 10) + "-0", Values: []any{"d", e.Data}})
		}
		switch {
		case done:
			id := strconv.FormatInt(w.last, 10) + "-1"
			if w.last == 0 {
				id = "0-2" // after the opening entry
			}
			p.XAdd(ctx, &redis.XAddArgs{Stream: w.key, ID: id, Values: []any{"done", "1"}})
			p.Expire(ctx, w.key, w.l.cfg.Retention)
		case time.Since(w.expiredAt) > w.l.cfg.RunningTTL/10:
			// A running turn's key expires RunningTTL after its last write, give or take a
			// tenth: pushed back now and then, not with every batch.
			w.expiredAt = time.Now()
			p.Expire(ctx, w.key, w.l.cfg.RunningTTL)
		}
		return nil
	})
	if err != nil {
		// A reconnect misses these frames (or a new turn replaced the log); the turn goes on.
		w.l.cfg.Logger.Warn("write a turn's frames to Redis", "session_id", w.session, "frames", len(batch), "done", done, "err", err)
	}
}

// Close implements streams.Writer: it waits for the flusher, then writes the rest and the done
// entry, and forgets the turn's stop.
func (w *writer) Close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.wg.Wait()
	w.mu.Lock()
	rest := w.queue
	w.queue = nil
	w.mu.Unlock()
	w.send(rest, true)
	w.l.mu.Lock()
	if e, ok := w.l.stops[w.session]; ok && e.turn == w.turn {
		delete(w.l.stops, w.session)
	}
	w.l.mu.Unlock()
}

func newTurnID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail (Go 1.24)
	return hex.EncodeToString(b[:])
}
