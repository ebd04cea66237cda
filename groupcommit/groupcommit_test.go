package groupcommit_test

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"svc/groupcommit"
)

// Calls that come while a batch runs are answered by the next batch, together, and never by
// the batch that was running when they came.
func TestGroupBatchesTheCallsThatCameMeanwhile(t *testing.T) {
	release := make(chan struct{})
	started := make(chan int, 10)
	var batches atomic.Int32
	g := &groupcommit.Group[int, [2]int]{Run: func(ins []int) ([][2]int, error) {
		n := int(batches.Add(1))
		started <- len(ins)
		if n == 1 {
			<-release
		}
		outs := make([][2]int, len(ins))
		for i, in := range ins {
			outs[i] = [2]int{in * 2, n}
		}
		return outs, nil
	}}
	var wg sync.WaitGroup
	got := make([][2]int, 6)
	wg.Go(func() { got[0], _ = g.Do(0) })
	if n := <-started; n != 1 {
		t.Fatalf("first batch of %d calls, want 1", n)
	}
	// Five calls come while the first batch runs.
	var queued sync.WaitGroup
	for i := 1; i < 6; i++ {
		queued.Add(1)
		wg.Go(func() {
			queued.Done()
			got[i], _ = g.Do(i)
		})
	}
	queued.Wait()
	for g.Waiting() < 5 {
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	if n := <-started; n != 5 {
		t.Errorf("second batch of %d calls, want the 5 that came meanwhile", n)
	}
	for i, out := range got {
		want := [2]int{2 * i, 2}
		if i == 0 {
			want[1] = 1
		}
		if out != want {
			t.Errorf("call %d = %v, want %v", i, out, want)
		}
	}
}

// Max bounds a batch; an error of Run is the error of every call of its batch; Run never runs
// twice at once.
func TestGroupMaxAndErrors(t *testing.T) {
	boom := errors.New("boom")
	var running, most atomic.Int32
	g := &groupcommit.Group[int, int]{Max: 4, Run: func(ins []int) ([]int, error) {
		if running.Add(1) > 1 {
			t.Error("Run called twice at once")
		}
		defer running.Add(-1)
		if int32(len(ins)) > most.Load() {
			most.Store(int32(len(ins)))
		}
		outs := make([]int, len(ins))
		for i, in := range ins {
			if in < 0 {
				return nil, boom
			}
			outs[i] = in + 1
		}
		return outs, nil
	}}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			if out, err := g.Do(i); err != nil || out != i+1 {
				t.Errorf("Do(%d) = %d, %v", i, out, err)
			}
		})
	}
	wg.Wait()
	if most.Load() > 4 {
		t.Errorf("a batch of %d calls, want at most 4", most.Load())
	}
	if _, err := g.Do(-1); !errors.Is(err, boom) {
		t.Errorf("Do(-1) = %v, want boom", err)
	}
	if out, err := g.Do(7); err != nil || out != 8 {
		t.Errorf("Do after an error = %d, %v", out, err)
	}
}
