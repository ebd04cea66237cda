package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// driver runs the clients.
type driver struct {
	c      config
	client *http.Client
}

// turnResult is one measured turn.
type turnResult struct {
	ttfd time.Duration // to the first text_delta; 0 when none came
	err  error
}

var (
	initPrefix = []byte(`data: {"type":"init"`)
	deltaMark  = []byte(`"type":"text_delta"`)
	doneMark   = []byte(`"type":"done"`)
)

// turn sends one chat turn and reads its stream to the end. It returns the session id.
func (d *driver) turn(ctx context.Context, session string, br *bufio.Reader) (string, turnResult) {
	body := `{"message":` + strconv.Quote(d.c.message)
	if session != "" {
		body += `,"session_id":` + strconv.Quote(session)
	}
	body += "}"
	req, err := http.NewRequestWithContext(ctx, "POST", d.c.url+"/chat/stream", strings.NewReader(body))
	if err != nil {
		return "", turnResult{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if d.c.token != "" {
		req.Header.Set("Authorization", "Bearer "+d.c.token)
	}
	began := time.Now()
	resp, err := d.client.Do(req)
	if err != nil {
		return "", turnResult{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return "", turnResult{err: fmt.Errorf("status %d: %s", resp.StatusCode, msg)}
	}
	br.Reset(resp.Body)
	var res turnResult
	sawDone := false
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			switch {
			case session == "" && bytes.HasPrefix(line, initPrefix):
				session = sessionID(line)
			case res.ttfd == 0 && bytes.Contains(line, deltaMark):
				res.ttfd = time.Since(began)
			case bytes.Contains(line, doneMark):
				sawDone = true
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				res.err = err
			} else if !sawDone {
				res.err = errors.New("stream ended without done")
			}
			return session, res
		}
	}
}

func sessionID(line []byte) string {
	var f struct {
		SessionID string `json:"session_id"`
	}
	_ = json.Unmarshal(bytes.TrimSpace(bytes.TrimPrefix(line, []byte("data: "))), &f) // a bad frame leaves the id empty
	return f.SessionID
}

// load runs c.concurrency clients for warm-up + duration and reports the measured window.
func (d *driver) load(ctx context.Context) error {
	var measuring atomic.Bool
	var mu sync.Mutex
	var ttfds []time.Duration
	var turns, failures atomic.Int64
	var firstErr atomic.Value
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range d.c.concurrency {
		wg.Go(func() {
			br := bufio.NewReaderSize(nil, 16<<10)
			local := make([]time.Duration, 0, 1024)
			session, n := "", 0
			for ctx.Err() == nil {
				if n%d.c.turnsPerSess == 0 {
					session = ""
				}
				var res turnResult
				session, res = d.turn(ctx, session, br)
				n++
				if ctx.Err() != nil {
					break
				}
				if !measuring.Load() {
					continue
				}
				if res.err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, res.err)
					continue
				}
				turns.Add(1)
				if res.ttfd > 0 {
					local = append(local, res.ttfd)
				}
			}
			mu.Lock()
			ttfds = append(ttfds, local...)
			mu.Unlock()
		})
	}
	select {
	case <-time.After(d.c.warmup):
	case <-ctx.Done():
	}
	cpu0, cpuErr := procCPU(d.c.pid)
	began := time.Now()
	measuring.Store(true)
	select {
	case <-time.After(d.c.duration):
	case <-ctx.Done():
	}
	measuring.Store(false)
	elapsed := time.Since(began)
	cpu1, cpuErr2 := procCPU(d.c.pid)
	cancel()
	wg.Wait()

	n := turns.Load()
	fmt.Printf("concurrency %d, %s measured: %d turns, %.0f turns/s, %d failed\n", d.c.concurrency, elapsed.Round(time.Millisecond), n, float64(n)/elapsed.Seconds(), failures.Load())
	if err, _ := firstErr.Load().(error); err != nil {
		fmt.Printf("first failure: %v\n", err)
	}
	if len(ttfds) > 0 {
		slices.Sort(ttfds)
		fmt.Printf("time to first text_delta: p50 %s, p99 %s, max %s\n", pct(ttfds, 50), pct(ttfds, 99), ttfds[len(ttfds)-1])
	}
	if d.c.pid > 0 {
		if cpuErr != nil || cpuErr2 != nil {
			return fmt.Errorf("read CPU time of pid %d: %w", d.c.pid, errors.Join(cpuErr, cpuErr2))
		}
		cpu := cpu1 - cpu0
		fmt.Printf("runtime CPU: %s over the window (%.0f%% of one core), %.3f ms per turn\n", cpu.Round(time.Millisecond),
			100*cpu.Seconds()/elapsed.Seconds(), float64(cpu.Microseconds())/1000/float64(max(n, 1)))
		if rss, err := procRSS(d.c.pid); err == nil {
			fmt.Printf("runtime RSS: %.1f MiB\n", float64(rss)/(1<<20))
		}
	}
	return nil
}

func pct(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	return sorted[min(max(i-1, 0), len(sorted)-1)].Round(time.Microsecond)
}

// idle creates c.idleSessions sessions with one turn each and reports the runtime's resident
// memory per session.
func (d *driver) idle(ctx context.Context) error {
	if d.c.pid <= 0 {
		return errors.New("-idle-sessions needs -pid")
	}
	before, err := procRSS(d.c.pid)
	if err != nil {
		return err
	}
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range d.c.concurrency {
		wg.Go(func() {
			br := bufio.NewReaderSize(nil, 16<<10)
			for ctx.Err() == nil && next.Add(1) <= int64(d.c.idleSessions) {
				if _, res := d.turn(ctx, "", br); res.err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	time.Sleep(2 * time.Second) // let the runtime's GC settle; this is a measurement, not a test
	after, err := procRSS(d.c.pid)
	if err != nil {
		return err
	}
	n := int64(d.c.idleSessions) - failed.Load()
	fmt.Printf("%d idle sessions (%d failed): RSS %.1f MiB -> %.1f MiB, %.0f bytes per session\n",
		n, failed.Load(), float64(before)/(1<<20), float64(after)/(1<<20), float64(after-before)/float64(max(n, 1)))
	return nil
}

// streams opens c.openStreams chat streams at once, waits until each has its first
// text_delta, reports the runtime's resident memory, then closes them.
func (d *driver) streams(ctx context.Context) error {
	if d.c.pid <= 0 {
		return errors.New("-open-streams needs -pid")
	}
	before, err := procRSS(d.c.pid)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opened := make(chan error, d.c.openStreams)
	var wg sync.WaitGroup
	for range d.c.openStreams {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, "POST", d.c.url+"/chat/stream", strings.NewReader(`{"message":`+strconv.Quote(d.c.message)+`}`))
			if err != nil {
				opened <- err
				return
			}
			if d.c.token != "" {
				req.Header.Set("Authorization", "Bearer "+d.c.token)
			}
			resp, err := d.client.Do(req)
			if err != nil {
				opened <- err
				return
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					opened <- fmt.Errorf("stream ended before its first text_delta: %w", err)
					return
				}
				if bytes.Contains(line, deltaMark) {
					opened <- nil
					break
				}
			}
			<-ctx.Done() // hold the stream open
		})
	}
	failed := 0
	for range d.c.openStreams {
		if err := <-opened; err != nil {
			failed++
			if failed == 1 {
				fmt.Fprintln(os.Stderr, "first failure:", err)
			}
		}
	}
	time.Sleep(time.Second) // let the runtime settle; a measurement, not a test
	during, err := procRSS(d.c.pid)
	if err != nil {
		return err
	}
	fmt.Printf("%d streams open (%d failed): RSS %.1f MiB -> %.1f MiB, %.0f KiB per stream\n", d.c.openStreams-failed, failed,
		float64(before)/(1<<20), float64(during)/(1<<20), float64(during-before)/1024/float64(max(d.c.openStreams-failed, 1)))
	select {
	case <-time.After(d.c.holdFor):
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	return nil
}

// procCPU is the user+system CPU time of pid (0: none).
func procCPU(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, nil
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which is in parentheses and may hold spaces).
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticks, nil
}

// procRSS is the resident set size of pid in bytes.
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
