package redisstream_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/migrations/dbtest"
	"svc/runner/streams"
	"svc/runner/streams/redisstream"
)

// newLogs returns n Logs on one Redis (n runners) with a key prefix of this test's own.
func newLogs(t *testing.T, n int, linger time.Duration) ([]*redisstream.Log, string) {
	t.Helper()
	rdb := dbtest.Redis(t)
	prefix := fmt.Sprintf("test:turnlog:%s:%d:", t.Name(), time.Now().UnixNano())
	logs := make([]*redisstream.Log, n)
	for i := range logs {
		l, err := redisstream.New(context.Background(), redisstream.Config{Redis: rdb, Prefix: prefix, Block: 200 * time.Millisecond, Linger: linger})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := l.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
				t.Errorf("close: %v", err)
			}
		})
		logs[i] = l
	}
	t.Cleanup(func() {
		keys, _ := rdb.Keys(context.Background(), prefix+"*").Result()
		if len(keys) > 0 {
			rdb.Del(context.Background(), keys...)
		}
	})
	return logs, prefix
}

// keys lists the Redis keys of the session's logs under prefix.
func keys(t *testing.T, prefix, session string) []string {
	t.Helper()
	ks, err := dbtest.Redis(t).Keys(context.Background(), prefix+"log:"+session+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func readAll(t *testing.T, l *redisstream.Log, session string, after int64) []streams.Entry {
	t.Helper()
	ctx := context.Background()
	b, err := l.Read(ctx, session, "", after)
	if err != nil {
		t.Fatal(err)
	}
	out := b.Entries
	for !b.Done {
		if len(b.Entries) > 0 {
			after = b.Entries[len(b.Entries)-1].ID
		}
		if b, err = l.Read(ctx, session, b.Turn, after); err != nil {
			t.Fatal(err)
		}
		out = append(out, b.Entries...)
	}
	return out
}

// A reader on one runner follows a turn written on another, from every frame boundary: no
// frame lost or repeated, ids strictly increasing, then the end.
func TestFollowFromEveryBoundary(t *testing.T) {
	logs, _ := newLogs(t, 2, 0)
	a, b := logs[0], logs[1]
	ctx := context.Background()
	const n = 12
	var stopped atomic.Bool
	w, err := a.Open(ctx, "s1", func() { stopped.Store(true) })
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []streams.Entry, n+1)
	for k := 0; k <= n; k++ {
		go func() { got <- readAllNoFatal(b, "s1", int64(k)) }()
	}
	for i := int64(1); i <= n; i++ {
		w.Append(i, []byte(`{"type":"x","n":`+strconv.FormatInt(i, 10)+`}`))
	}
	// Stop from the other runner reaches this one's turn while it runs: the pub/sub message
	// arrives on its own time, and a turn that ended (Close) has no stop to call any more, so
	// the turn ends only once it was stopped.
	if ok, err := b.Stop(ctx, "s1"); err != nil || !ok {
		t.Fatalf("stop: %v %v", ok, err)
	}
	for deadline := time.Now().Add(30 * time.Second); !stopped.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stop sent from the other runner never reached the turn")
		}
	}
	w.Close()
	for range n + 1 {
		es := <-got
		if len(es) == 0 {
			continue
		}
		first := es[0].ID
		for i, e := range es {
			if e.ID != first+int64(i) || string(e.Data) != `{"type":"x","n":`+strconv.FormatInt(e.ID, 10)+`}` {
				t.Fatalf("entries %v", es)
			}
		}
		if es[len(es)-1].ID != n {
			t.Fatalf("ends at %d", es[len(es)-1].ID)
		}
	}
	if ok, err := a.Stop(ctx, "s1"); err != nil || ok {
		t.Errorf("stop after done: %v %v", ok, err)
	}
	for k := int64(0); k <= n; k++ {
		if es := readAll(t, a, "s1", k); int64(len(es)) != n-k {
			t.Errorf("after %d: %d entries", k, len(es))
		}
		if es := readAll(t, b, "s1", k); int64(len(es)) != n-k {
			t.Errorf("after %d, from the other runner: %d entries", k, len(es))
		}
	}
}

func readAllNoFatal(l *redisstream.Log, session string, after int64) []streams.Entry {
	ctx := context.Background()
	var out []streams.Entry
	turn := ""
	for {
		b, err := l.Read(ctx, session, turn, after)
		if err != nil {
			return out
		}
		turn = b.Turn
		out = append(out, b.Entries...)
		if len(b.Entries) > 0 {
			after = b.Entries[len(b.Entries)-1].ID
		}
		if b.Done {
			return out
		}
	}
}

// A turn nobody asks for from another runner writes nothing to Redis; asked for after its
// end, it is written whole and expires after the retention; a session without a turn reads
// ErrNoTurn; a turn whose runner died reads ErrNoTurn, and a follower of its stream ends when
// the stream expires.
func TestExpiry(t *testing.T) {
	logs, prefix := newLogs(t, 3, 0)
	a, b, c := logs[0], logs[1], logs[2]
	ctx := context.Background()
	if _, err := a.Read(ctx, "none", "", 0); !errors.Is(err, streams.ErrNoTurn) {
		t.Fatalf("no turn: %v", err)
	}
	w, err := a.Open(ctx, "s2", nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Append(1, []byte(`{}`))
	w.Close()
	if ks := keys(t, prefix, "s2"); len(ks) != 0 {
		t.Fatalf("a turn nobody asked for is in Redis: %v", ks)
	}
	if es := readAll(t, b, "s2", 0); len(es) != 1 {
		t.Fatalf("from the other runner: %v", es)
	}
	rdb := dbtest.Redis(t)
	ks := keys(t, prefix, "s2")
	if len(ks) != 1 {
		t.Fatalf("keys %v", ks)
	}
	ttl, err := rdb.TTL(ctx, ks[0]).Result()
	if err != nil || ttl <= 0 || ttl > streams.Retention {
		t.Fatalf("ttl %v %v", ttl, err)
	}
	// A turn whose runner died before anyone asked for it: nothing to read.
	wc, err := c.Open(ctx, "s6", nil)
	if err != nil {
		t.Fatal(err)
	}
	wc.Append(1, []byte(`{}`))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Read(ctx, "s6", "", 0); !errors.Is(err, streams.ErrNoTurn) {
		t.Fatalf("the turn of a runner gone: %v", err)
	}
	// A turn followed from another runner whose runner died: its stream vanishes (here at
	// once, as its expiry would), and the follower ends.
	w2, err := a.Open(ctx, "s3", nil)
	if err != nil {
		t.Fatal(err)
	}
	w2.Append(1, []byte(`{}`))
	bt, err := b.Read(ctx, "s3", "", 1)
	if err != nil || bt.Done {
		t.Fatalf("running: %v %v", bt, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.Read(ctx, "s3", bt.Turn, 1)
		for err == nil {
			_, err = b.Read(ctx, "s3", bt.Turn, 1)
		}
		done <- err
	}()
	rdb.Del(ctx, prefix+"log:s3:"+bt.Turn)
	if err := <-done; !errors.Is(err, streams.ErrNoTurn) {
		t.Errorf("follower of a vanished log: %v", err)
	}
	w2.Close()
}

// The latest turn of a session is read, whichever runner ran it and whichever is asked.
func TestLatestTurnOfTheRunners(t *testing.T) {
	logs, _ := newLogs(t, 3, 0)
	ctx := context.Background()
	for i, l := range logs[:2] { // turn 1 on the first runner, then turn 2 on the second
		w, err := l.Open(ctx, "s7", nil)
		if err != nil {
			t.Fatal(err)
		}
		w.Append(1, []byte(`{"turn":`+strconv.Itoa(i+1)+`}`))
		w.Close()
		time.Sleep(2 * time.Millisecond) // the turns' starts apart
	}
	for i, l := range logs {
		es := readAll(t, l, "s7", 0)
		if len(es) != 1 || string(es[0].Data) != `{"turn":2}` {
			t.Errorf("runner %d reads %v", i, es)
		}
	}
}

// Frames split over several entries (batches: here each ends with a frame past the size that
// goes at once, and the last with the turn's end): a reader from every frame boundary, on the
// other runner, gets exactly the frames after it.
func TestBatchesFromEveryBoundary(t *testing.T) {
	logs, prefix := newLogs(t, 2, time.Hour)
	a, b := logs[0], logs[1]
	ctx := context.Background()
	rdb := dbtest.Redis(t)
	w, err := a.Open(ctx, "s4", nil)
	if err != nil {
		t.Fatal(err)
	}
	// A reader on the other runner asks for the turn: from then on it goes to Redis.
	bt, err := b.Read(ctx, "s4", "", 0)
	if err != nil || bt.Done || len(bt.Entries) != 0 {
		t.Fatalf("%+v %v", bt, err)
	}
	key := prefix + "log:s4:" + bt.Turn
	frame := func(i int64) []byte {
		pad := ""
		if i == 3 || i == 6 {
			pad = strings.Repeat("x", 70<<10)
		}
		return []byte(`{"type":"x","n":` + strconv.FormatInt(i, 10) + `,"p":"` + pad + `"}`)
	}
	const n = 10
	entries := int64(1) // the opening entry
	for i := int64(1); i <= n; i++ {
		w.Append(i, frame(i))
		if i == 3 || i == 6 { // wait until the batch is in Redis, so the next starts an entry
			entries++
			for l, _ := rdb.XLen(ctx, key).Result(); l < entries; l, _ = rdb.XLen(ctx, key).Result() {
				time.Sleep(time.Millisecond)
			}
		}
	}
	w.Close()
	if l, _ := rdb.XLen(ctx, key).Result(); l != 4 {
		t.Errorf("%d entries, want the opening one and 3 batches, the last with done", l)
	}
	for k := int64(0); k <= n; k++ {
		es := readAll(t, b, "s4", k)
		if int64(len(es)) != n-k {
			t.Fatalf("after %d: %d frames", k, len(es))
		}
		for i, e := range es {
			if e.ID != k+1+int64(i) || string(e.Data) != string(frame(e.ID)) {
				t.Fatalf("after %d: frame %d is %d %.40s", k, i, e.ID, e.Data)
			}
		}
	}
}

// A turn without frames is done, with nothing to replay.
func TestNoFrames(t *testing.T) {
	logs, _ := newLogs(t, 2, 0)
	a, b := logs[0], logs[1]
	w, err := a.Open(context.Background(), "s5", nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	bt, err := b.Read(context.Background(), "s5", "", 0)
	if err != nil || !bt.Done || len(bt.Entries) != 0 {
		t.Fatalf("%+v %v", bt, err)
	}
}
