package main

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"svc/migrations/dbtest"
)

// countGets is a go-redis hook that counts GET commands.
type countGets struct{ n atomic.Int32 }

func (h *countGets) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countGets) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *countGets) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "get" {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

// The routers' reads of the change counter: a burst of concurrent requests shares a few GETs,
// and a read that starts after a change sees it.
func TestDeploymentChangesShareReads(t *testing.T) {
	opt := dbtest.Redis(t).Options()
	opt.DB = 13 // the key is a fixed name: a database no other test uses
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	if err := rdb.Del(ctx, changesKey).Err(); err != nil {
		t.Fatal(err)
	}
	hook := &countGets{}
	rdb.AddHook(hook)
	read := deploymentChanges(rdb)
	if n, err := read(ctx); err != nil || n != 0 {
		t.Fatalf("before any change = %d, %v; want 0", n, err)
	}
	if err := rdb.Incr(ctx, changesKey).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := read(ctx); err != nil || n != 1 {
		t.Fatalf("after a change = %d, %v; want 1", n, err)
	}
	before := hook.n.Load()
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			if n, err := read(ctx); err != nil || n != 1 {
				t.Errorf("concurrent read = %d, %v; want 1", n, err)
			}
		})
	}
	wg.Wait()
	if gets := hook.n.Load() - before; gets >= 200 {
		t.Errorf("200 concurrent reads made %d GETs, want them shared", gets)
	} else {
		t.Logf("200 concurrent reads, %d GETs", gets)
	}
}
