package memstream_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"svc/runner/streams"
	"svc/runner/streams/memstream"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Followers from every boundary get exactly the frames after theirs, then the end; the log
// expires Retention after done and is swept by a later Open.
func TestFollowAndExpire(t *testing.T) {
	clk := &clock{now: time.Unix(0, 0)}
	l := memstream.New(memstream.Config{Now: clk.Now})
	ctx := context.Background()
	const n = 10
	stopped := false
	w, err := l.Open(ctx, "s", func() { stopped = true })
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make([][]streams.Entry, n+1)
	for k := range n + 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			after, turn := int64(k), ""
			for {
				b, err := l.Read(ctx, "s", turn, after)
				if err != nil {
					t.Error(err)
					return
				}
				turn = b.Turn
				got[k] = append(got[k], b.Entries...)
				if len(b.Entries) > 0 {
					after = b.Entries[len(b.Entries)-1].ID
				}
				if b.Done {
					return
				}
			}
		}()
	}
	for i := int64(1); i <= n; i++ {
		w.Append(i, []byte(strconv.FormatInt(i, 10)))
	}
	w.Append(n, []byte("again")) // a repeated id is dropped
	if ok, _ := l.Stop(ctx, "s"); !ok || !stopped {
		t.Fatal("stop of a running turn")
	}
	w.Close()
	wg.Wait()
	for k, es := range got {
		if len(es) != n-k {
			t.Fatalf("after %d: %v", k, es)
		}
		for i, e := range es {
			if e.ID != int64(k+i+1) || string(e.Data) != strconv.FormatInt(e.ID, 10) {
				t.Fatalf("after %d: %v", k, es)
			}
		}
	}
	if ok, _ := l.Stop(ctx, "s"); ok {
		t.Error("stop after done")
	}
	clk.Add(streams.Retention)
	if _, err := l.Read(ctx, "s", "", 0); !errors.Is(err, streams.ErrNoTurn) {
		t.Fatalf("after retention: %v", err)
	}
	if _, err := l.Open(ctx, "other", nil); err != nil {
		t.Fatal(err)
	}
	if l.Len() != 1 {
		t.Errorf("%d logs kept", l.Len())
	}
}

// Last describes the session's last turn, opened with the id given, while it runs and until
// its retention passes.
func TestLast(t *testing.T) {
	clk := &clock{now: time.Unix(100, 0)}
	l := memstream.New(memstream.Config{Now: clk.Now})
	if _, ok := l.Last("s"); ok {
		t.Fatal("a turn before any")
	}
	w := l.OpenTurn("s", "t1", nil)
	if got, ok := l.Last("s"); !ok || got != (memstream.Turn{ID: "t1", Started: time.Unix(100, 0)}) {
		t.Fatalf("running: %+v %v", got, ok)
	}
	clk.Add(time.Second)
	w.Close()
	if got, ok := l.Last("s"); !ok || !got.Done || got.ID != "t1" {
		t.Fatalf("ended: %+v %v", got, ok)
	}
	if b, err := l.Read(context.Background(), "s", "", 0); err != nil || b.Turn != "t1" {
		t.Fatalf("read: %+v %v", b, err)
	}
	clk.Add(streams.Retention)
	if got, ok := l.Last("s"); ok {
		t.Fatalf("after the retention: %+v", got)
	}
}
