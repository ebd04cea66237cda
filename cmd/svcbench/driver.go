package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
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
	c       config
	addr    string // host:port of -url
	prefix  []byte // a request up to Content-Length's value
	message []byte // the request body's start: {"message":"..."
}

// newDriver prepares requests to c.url, which validate has checked, with c.host as their Host
// header when set.
func newDriver(c config) (*driver, error) {
	u, err := url.Parse(c.url)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("-url must be an http:// URL with a host, got %q", c.url)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	host := cmp.Or(c.host, u.Host)
	prefix := "POST " + u.EscapedPath() + "/chat/stream HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: application/json\r\n"
	if c.token != "" {
		prefix += "Authorization: Bearer " + c.token + "\r\n"
	}
	prefix += "Content-Length: "
	return &driver{c: c, addr: addr, prefix: []byte(prefix), message: []byte(`{"message":` + strconv.Quote(c.message))}, nil
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

// body is a turn's request body, built in cl's buffer.
func (d *driver) body(cl *rawClient, session string) []byte {
	b := append(cl.reqBody[:0], d.message...)
	if session != "" {
		b = append(b, `,"session_id":`...)
		b = strconv.AppendQuote(b, session)
	}
	cl.reqBody = append(b, '}')
	return cl.reqBody
}

// turn sends one chat turn on cl and reads its stream to the end. It returns the session id.
func (d *driver) turn(cl *rawClient, session string) (string, turnResult) {
	status, err := cl.post(d.body(cl, session))
	if err != nil {
		return "", turnResult{err: err}
	}
	if status != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(&cl.body, 512))
		cl.done(false)
		return "", turnResult{err: fmt.Errorf("status %d: %s", status, msg)}
	}
	br := cl.lines
	var res turnResult
	sawDone := false
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			switch {
			case session == "" && bytes.HasPrefix(line, initPrefix):
				session = sessionID(line)
			case res.ttfd == 0 && bytes.Contains(line, deltaMark):
				res.ttfd = time.Since(cl.began)
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
			cl.done(errors.Is(err, io.EOF))
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
			cl := d.newClient(ctx, 16<<10)
			defer cl.Close()
			local := make([]time.Duration, 0, 1024)
			session, n := "", 0
			for ctx.Err() == nil {
				if n%d.c.turnsPerSess == 0 {
					session = ""
				}
				var res turnResult
				session, res = d.turn(cl, session)
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
		fmt.Printf("time to first text_delta: p50 %s, p90 %s, p99 %s, p99.9 %s, max %s\n", pct(ttfds, 500), pct(ttfds, 900), pct(ttfds, 990), pct(ttfds, 999), ttfds[len(ttfds)-1])
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

// pct is the permille'th value of sorted (990: the 99th percentile).
func pct(sorted []time.Duration, permille int) time.Duration {
	i := (len(sorted)*permille + 999) / 1000
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
			cl := d.newClient(ctx, 16<<10)
			defer cl.Close()
			for ctx.Err() == nil && next.Add(1) <= int64(d.c.idleSessions) {
				if _, res := d.turn(cl, ""); res.err != nil {
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
	anonBefore, err := procAnon(d.c.pid)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opened := make(chan error, d.c.openStreams)
	var wg sync.WaitGroup
	for range d.c.openStreams {
		wg.Go(func() {
			cl := d.newClient(ctx, 4<<10)
			defer cl.Close()
			err := d.open(cl)
			opened <- err
			if err == nil {
				<-ctx.Done() // hold the stream open
			}
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
	open := max(d.c.openStreams-failed, 1)
	anon := func() string {
		a, err := procAnon(d.c.pid)
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("anonymous %.0f KiB per stream", float64(a-anonBefore)/1024/float64(open))
	}
	fmt.Printf("%d streams open (%d failed): RSS %.1f MiB -> %.1f MiB, %.0f KiB per stream (%s)\n", d.c.openStreams-failed, failed,
		float64(before)/(1<<20), float64(during)/(1<<20), float64(during-before)/1024/float64(open), anon())
	select {
	case <-time.After(d.c.holdFor):
		// Held past the runtime's periodic GC (2 minutes), the figure is the settled one: the
		// garbage of opening the streams collected, goroutine stacks shrunk.
		if d.c.holdFor > 0 {
			if after, err := procRSS(d.c.pid); err == nil {
				fmt.Printf("after holding them %s: RSS %.1f MiB, %.0f KiB per stream (%s)\n", d.c.holdFor,
					float64(after)/(1<<20), float64(after-before)/1024/float64(open), anon())
			}
		}
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	return nil
}

// open starts one stream on cl and reads it up to its first text_delta.
func (d *driver) open(cl *rawClient) error {
	status, err := cl.post(d.body(cl, ""))
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(&cl.body, 512))
		return fmt.Errorf("status %d: %s", status, msg)
	}
	for {
		line, err := cl.lines.ReadSlice('\n')
		if bytes.Contains(line, deltaMark) {
			return nil
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return fmt.Errorf("stream ended before its first text_delta: %w", err)
		}
	}
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
func procRSS(pid int) (int64, error) { return procStatus(pid, "VmRSS:") }

// procAnon is the anonymous part of pid's resident set in bytes: its heap, stacks and other
// private memory, without the pages of its executable, which differ between two builds of
// it with the page cache, not with what the process holds.
func procAnon(pid int) (int64, error) { return procStatus(pid, "RssAnon:") }

// procStatus reads a kB field of /proc/pid/status in bytes.
func procStatus(pid int, field string) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}
