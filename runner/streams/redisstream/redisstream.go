// Package redisstream keeps the per-turn frame logs of streams for the runners of a
// scale-out, so that any runner serves a reconnect and a stop. A turn's frames stay in the
// memory of the process that runs it (memstream) and reach Redis only when another runner asks
// for them: a turn nobody reattaches to from elsewhere costs no Redis command at all (the
// reattach, not the turn, pays for the round trips).
//
// The runners share one pub/sub channel, <prefix>ask, and each has its own answer channel,
// <prefix>answer:<process>. A runner that has no running turn of a session asks the others for
// it (PUBLISH tells how many received the question, so it waits for that many answers, at most
// AskTimeout): a runner that holds a turn of the session writes what it has to the turn's Redis
// stream and answers with the turn's id and start; the asker reads the latest turn there. A
// running turn that was asked for goes on writing its frames to Redis until its end. A stop is
// asked the same way, and answered once the turn's stop was called.
//
// The log of a turn in Redis is the stream <prefix>log:<session>:<turn>: an opening entry 0-1
// naming the turn, then one entry per batch of frames, <n>-0 where n is the batch's last frame
// (field f: the frames, each its id and length as uvarints then its JSON), and the done mark
// (field done) in the last batch, or alone as the entry <n>-1 (0-2 without frames). A reader
// after frame a reads from a-0: the batch ending with frame a (for its done mark), the one
// holding frame a+1 and those after, skipping the frames up to a. A running turn's stream
// expires about RunningTTL after its last write (a runner that dies mid-turn leaves no log
// behind for long, and its readers end); the done mark sets Retention. A turn whose runner
// died is not asked for again: a reconnect finds its stream if it was written, else no turn.
package redisstream

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/runner/streams"
	"svc/runner/streams/memstream"
)

// Defaults of Config.
const (
	DefaultPrefix     = "svc:turnlog:"
	DefaultRunningTTL = 30 * time.Minute
	DefaultBlock      = 15 * time.Second
	DefaultLinger     = 10 * time.Millisecond
	DefaultAskTimeout = time.Second
)

// maxBatch is the size of a pending batch that goes to Redis without waiting for Linger.
const maxBatch = 64 << 10

// maxAnswers bounds the answers kept for one question: a scale-out of more runners waits
// AskTimeout for the rest.
const maxAnswers = 256

// Config configures a Log. Redis is required.
type Config struct {
	Redis redis.UniversalClient
	// Prefix starts every key and channel; "" means DefaultPrefix.
	Prefix string
	// Retention keeps a log after its turn ended; 0 means streams.Retention.
	Retention time.Duration
	// RunningTTL expires the Redis stream of a running turn that wrote nothing to it for this
	// long (its runner died); 0 means DefaultRunningTTL.
	RunningTTL time.Duration
	// Block bounds one wait of a following Read; 0 means DefaultBlock.
	Block time.Duration
	// Linger is how long a frame of a turn asked for waits for more to share its write to
	// Redis (one command and round trip per batch instead of per frame); a follower on another
	// runner sees frames up to Linger late, the live client not at all, and the last frames go
	// at the turn's end. 0 means DefaultLinger.
	Linger time.Duration
	// AskTimeout bounds the wait for the other runners' answers to a question (a runner
	// that does not answer in time is taken to hold nothing); 0 means DefaultAskTimeout.
	AskTimeout time.Duration
	Logger     *slog.Logger
}

// Log is a streams log shared by runners over Redis. Create it with New; Close ends its
// subscription.
type Log struct {
	cfg     Config
	local   *memstream.Log // the turns of this process
	process string         // this process's id: its answer channel
	sub     *redis.PubSub
	mu      sync.Mutex
	turns   map[string]*writer     // the running turns of this process, by session
	written map[string]writtenTurn // the ended turns of this process written to Redis, by session
	swept   time.Time              // when written was last swept
	waiting map[string]chan answer // this process's questions waiting for answers, by id
	wg      sync.WaitGroup
}

// writtenTurn is an ended turn written whole to its Redis stream, which expires Retention
// after at.
type writtenTurn struct {
	turn string
	at   time.Time
}

// question is what a runner asks the others.
type question struct {
	ID      string `json:"id"`
	Op      string `json:"op"` // opRead or opStop
	Session string `json:"session"`
	From    string `json:"from"` // the asking process
}

// The questions.
const (
	opRead = "read" // write the session's last turn to Redis and answer its id
	opStop = "stop" // stop the session's running turn
)

// answer is what a runner answers: whether it holds a turn of the session (for opStop:
// whether it stopped one), and which.
type answer struct {
	ID      string    `json:"id"`
	Have    bool      `json:"have"`
	Turn    string    `json:"turn,omitempty"`
	Started time.Time `json:"started,omitzero"`
}

// New returns a Log of cfg, subscribed to the questions of every process.
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
	if cfg.AskTimeout <= 0 {
		cfg.AskTimeout = DefaultAskTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	l := &Log{
		cfg: cfg, local: memstream.New(memstream.Config{Retention: cfg.Retention}), process: newTurnID(),
		turns: map[string]*writer{}, written: map[string]writtenTurn{}, waiting: map[string]chan answer{},
	}
	l.sub = cfg.Redis.Subscribe(ctx, l.askChannel(), l.answerChannel(l.process))
	for range 2 { // the confirmations of both channels
		if _, err := l.sub.Receive(ctx); err != nil {
			_ = l.sub.Close() // the error that matters is Receive's
			return nil, fmt.Errorf("redisstream: subscribe: %w", err)
		}
	}
	l.wg.Add(1)
	go l.listen()
	return l, nil
}

func (l *Log) askChannel() string                  { return l.cfg.Prefix + "ask" }
func (l *Log) answerChannel(process string) string { return l.cfg.Prefix + "answer:" + process }
func (l *Log) key(session, turn string) string     { return l.cfg.Prefix + "log:" + session + ":" + turn }

// Close ends the subscription and waits for its listener and the answers it was giving.
func (l *Log) Close() error {
	err := l.sub.Close()
	l.wg.Wait()
	return err
}

// listen answers the other processes' questions, each on a goroutine of its own, and hands
// the answers to this process's questions to their askers.
func (l *Log) listen() {
	defer l.wg.Done()
	for m := range l.sub.Channel() {
		if m.Channel != l.askChannel() {
			var a answer
			if err := json.Unmarshal([]byte(m.Payload), &a); err != nil {
				continue
			}
			l.mu.Lock()
			ch := l.waiting[a.ID]
			l.mu.Unlock()
			select {
			case ch <- a: // nil: an answer after its question's time
			default:
			}
			continue
		}
		var q question
		if err := json.Unmarshal([]byte(m.Payload), &q); err != nil || q.From == l.process {
			continue
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.answer(q)
		}()
	}
}

// answer answers q: for opRead, the session's last turn here, written to Redis first; for
// opStop, whether a running turn here was stopped.
func (l *Log) answer(q question) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a := answer{ID: q.ID}
	switch q.Op {
	case opStop:
		a.Have, _ = l.local.Stop(ctx, q.Session) // memstream's Stop does not fail
	case opRead:
		var err error
		if a, err = l.publish(ctx, q.Session); err != nil {
			l.cfg.Logger.Warn("write a turn's frames to Redis for another runner", "session_id", q.Session, "err", err)
			return // asked again by the next reconnect
		}
		a.ID = q.ID
	default:
		return
	}
	body, _ := json.Marshal(a) // an answer always encodes
	if err := l.cfg.Redis.Publish(ctx, l.answerChannel(q.From), body).Err(); err != nil {
		l.cfg.Logger.Warn("answer another runner", "session_id", q.Session, "err", err)
	}
}

// publish writes the session's last turn here to its Redis stream, and says which it is: a
// running turn once (it then writes each new frame there too, until its end), a turn that
// ended whole with its done mark each time it is asked for (in one transaction: a stream
// written before is replaced by the same frames).
func (l *Log) publish(ctx context.Context, session string) (answer, error) {
	l.mu.Lock()
	w := l.turns[session]
	l.mu.Unlock()
	if w != nil {
		w.mu.Lock() // no frame is appended between the copy below and the replica's first
		defer w.mu.Unlock()
	}
	last, ok := l.local.Last(session)
	if !ok {
		return answer{}, nil
	}
	a := answer{Have: true, Turn: last.ID, Started: last.Started}
	running := w != nil && w.turn == last.ID && !last.Done // w.mu held: Close cannot end it meanwhile
	if w != nil && w.turn == last.ID && w.rw != nil {
		return a, nil // in Redis already; its replica writes the rest and the done mark
	}
	if !running && l.wasWritten(session, last.ID) {
		return a, nil
	}
	b, err := l.local.Read(ctx, session, "", 0) // the turn as it is, without waiting
	if err != nil || b.Turn != last.ID {
		return answer{}, nil // expired or replaced meanwhile
	}
	key := l.key(session, b.Turn)
	var lastID int64
	var frames []byte
	for _, e := range b.Entries {
		frames = appendFrame(frames, e.ID, e.Data)
		lastID = e.ID
	}
	ttl := l.cfg.Retention
	if running {
		ttl = l.cfg.RunningTTL
	}
	_, err = l.cfg.Redis.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, key)
		p.XAdd(ctx, &redis.XAddArgs{Stream: key, ID: "0-1", Values: []any{"turn", b.Turn}})
		if args, ok := batchEntry(key, frames, lastID, b.Done); ok {
			p.XAdd(ctx, &args)
		}
		p.Expire(ctx, key, ttl)
		return nil
	})
	if err != nil {
		return answer{}, fmt.Errorf("redisstream: publish: %w", err)
	}
	if running {
		w.rw = &replica{l: l, session: session, key: key, last: lastID, expiredAt: time.Now()}
		w.rw.cond.L = &w.rw.mu
	} else if b.Done {
		l.mu.Lock()
		l.written[session] = writtenTurn{turn: b.Turn, at: time.Now()}
		l.mu.Unlock()
	}
	return a, nil
}

// wasWritten reports whether the ended turn of session was written whole to Redis and is
// still there (for half its Retention, to be safe); it forgets the others, at most every
// Retention/5.
func (l *Log) wasWritten(session, turn string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if now.Sub(l.swept) >= l.cfg.Retention/5 {
		l.swept = now
		for s, wt := range l.written {
			if now.Sub(wt.at) >= l.cfg.Retention/2 {
				delete(l.written, s)
			}
		}
	}
	wt, ok := l.written[session]
	return ok && wt.turn == turn && now.Sub(wt.at) < l.cfg.Retention/2
}

// ask asks the other processes q (its id and From set here) and returns their answers: as
// many as received it, or those that came within AskTimeout.
func (l *Log) ask(ctx context.Context, op, session string) ([]answer, error) {
	q := question{ID: newTurnID(), Op: op, Session: session, From: l.process}
	ch := make(chan answer, maxAnswers)
	l.mu.Lock()
	l.waiting[q.ID] = ch
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.waiting, q.ID)
		l.mu.Unlock()
	}()
	body, _ := json.Marshal(q) // a question always encodes
	n, err := l.cfg.Redis.Publish(ctx, l.askChannel(), body).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstream: ask the other runners: %w", err)
	}
	want := int(min(n-1, maxAnswers)) // this process received it too
	t := time.NewTimer(l.cfg.AskTimeout)
	defer t.Stop()
	var got []answer
	for len(got) < want {
		select {
		case a := <-ch:
			got = append(got, a)
		case <-t.C:
			return got, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return got, nil
}

var _ streams.Writer = (*writer)(nil)

// writer is the streams.Writer of one turn: its frames go to this process's memory, and to
// its replica in Redis once another runner asked for the turn.
type writer struct {
	l       *Log
	session string
	turn    string
	mw      streams.Writer

	mu sync.Mutex
	rw *replica // nil until the turn is asked for
}

// Open starts the log of a new turn of session: in this process's memory, nothing in Redis.
func (l *Log) Open(_ context.Context, session string, stop func()) (streams.Writer, error) {
	w := &writer{l: l, session: session, turn: newTurnID()}
	l.mu.Lock() // a question between the two finds the turn with its writer
	w.mw = l.local.OpenTurn(session, w.turn, stop)
	l.turns[session] = w
	l.mu.Unlock()
	return w, nil
}

// Append implements streams.Writer.
func (w *writer) Append(id int64, data []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mw.Append(id, data)
	if w.rw != nil {
		w.rw.Append(id, data)
	}
}

// Close implements streams.Writer: the turn ends in memory, and in Redis when it was asked
// for (the rest of its frames and the done mark, before Close returns).
func (w *writer) Close() {
	w.mu.Lock()
	w.mw.Close()
	rw := w.rw
	w.mu.Unlock()
	if rw != nil {
		rw.Close()
	}
	w.l.mu.Lock()
	if w.l.turns[w.session] == w {
		delete(w.l.turns, w.session)
	}
	w.l.mu.Unlock()
}

// Read implements the reads of streams logs (see runtime.TurnLog): a turn of this process
// from its memory, another's from Redis. Without turn it reads the session's latest turn: the
// one running here, else the latest of those the runners hold (each asked).
func (l *Log) Read(ctx context.Context, session, turn string, after int64) (streams.Batch, error) {
	last, here := l.local.Last(session)
	if turn != "" {
		if here && last.ID == turn {
			return l.local.Read(ctx, session, turn, after)
		}
		return l.readRedis(ctx, session, turn, after, true)
	}
	if here && !last.Done {
		return l.local.Read(ctx, session, "", after) // a session runs one turn at a time
	}
	answers, err := l.ask(ctx, opRead, session)
	if err != nil {
		return streams.Batch{}, err
	}
	var best answer
	if here {
		best = answer{Have: true, Turn: last.ID, Started: last.Started}
	}
	for _, a := range answers {
		if a.Have && (!best.Have || a.Started.After(best.Started)) {
			best = a
		}
	}
	switch {
	case !best.Have:
		return streams.Batch{}, streams.ErrNoTurn
	case here && best.Turn == last.ID:
		return l.local.Read(ctx, session, "", after)
	}
	return l.readRedis(ctx, session, best.Turn, after, false)
}

// readRedis reads the frames of the session's turn after id after from its Redis stream;
// when follow is set and there are none yet, it waits for the next, within Block.
func (l *Log) readRedis(ctx context.Context, session, turn string, after int64, follow bool) (streams.Batch, error) {
	key := l.key(session, turn)
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
	b := streams.Batch{Turn: turn}
	lastSeen := l.collect(&b, tail.Val(), after)
	if len(b.Entries) > 0 || b.Done || !follow {
		return b, nil
	}
	// Follow: wait for the next entry, within Block.
	res, err := l.cfg.Redis.XRead(ctx, &redis.XReadArgs{Streams: []string{key, lastSeen}, Block: l.cfg.Block}).Result()
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

// Stop ends the session's running turn: here, or on the runner that runs it (asked, and
// answered once its stop was called). It reports whether a turn was running.
func (l *Log) Stop(ctx context.Context, session string) (bool, error) {
	if ok, _ := l.local.Stop(ctx, session); ok { // memstream's Stop does not fail
		return true, nil
	}
	answers, err := l.ask(ctx, opStop, session)
	if err != nil {
		return false, fmt.Errorf("redisstream: stop: %w", err)
	}
	for _, a := range answers {
		if a.Have {
			return true, nil
		}
	}
	return false, nil
}

// replica writes the frames of a running turn to its Redis stream, from the moment another
// runner asked for the turn. Append encodes a frame into the pending batch and arms a timer of
// Linger; when it fires, the batch goes to Redis as one entry (off the turn's goroutine: the
// turn never waits for Redis while it runs). Close cancels a pending timer and writes the rest
// with the done mark, in the same entry when frames are left, before it returns.
type replica struct {
	l       *Log
	session string
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

// Append adds a frame to the pending batch.
func (w *replica) Append(id int64, data []byte) {
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
func (w *replica) linger() time.Duration {
	if len(w.pending) >= maxBatch {
		return 0
	}
	return w.l.cfg.Linger
}

// flush, the timer's function, sends the pending batch; frames appended meanwhile re-arm the
// timer.
func (w *replica) flush() {
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
func (w *replica) send(batch []byte, last int64, done bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	args, _ := batchEntry(w.key, batch, last, done) // send has a batch, or done
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

// Close cancels the timer or waits for its flush, then writes the rest and the done mark.
func (w *replica) Close() {
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
}

// batchEntry is the entry of stream key holding the frames of batch, whose last is last, and
// the done mark when done: <last>-0, or without frames <last>-1 (0-2 when the turn had none).
// false: no frames and not done, no entry.
func batchEntry(key string, batch []byte, last int64, done bool) (redis.XAddArgs, bool) {
	args := redis.XAddArgs{Stream: key}
	switch {
	case len(batch) > 0 && done:
		args.ID, args.Values = strconv.FormatInt(last, 10)+"-0", []any{"f", batch, "done", "1"}
	case len(batch) > 0:
		args.ID, args.Values = strconv.FormatInt(last, 10)+"-0", []any{"f", batch}
	case !done:
		return args, false
	case last == 0:
		args.ID, args.Values = "0-2", []any{"done", "1"} // after the opening entry
	default:
		args.ID, args.Values = strconv.FormatInt(last, 10)+"-1", []any{"done", "1"}
	}
	return args, true
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
