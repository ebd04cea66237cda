package handlers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"svc/runner/handlers"
	"svc/runner/sandbox"
	"svc/runner/tools"
)

// hostile are handlers written to hurt the process that runs them, each with how its call must
// end. In the sandbox each ends by its deadline (plus the grace before a kill), its memory cap,
// or an error of its own, and the process that serves other agents is untouched.
var hostile = []struct {
	name string
	body string // the body of an async handler (p, ctx)
	want func(error) bool
}{
	{"endless loop", "while (true) {}", isDeadline},
	{"Array(1e8).fill", "return new Array(1e8).fill(1).length;", isMemory},
	{"catastrophic regular expression", `return /^(a+)+(?!x)$/.test("a".repeat(30) + "b");`, isDeadline},
	{"string growth", `let s = "x"; for (;;) s += s + "y";`, isMemory},
	{"array growth", "const x = 'x'.repeat(4096), a: any[] = []; for (;;) a.push({n: a.length, s: x + a.length});", isMemory},
	{"deep recursion", "const f = (n: number): number => f(n + 1) + 1; return f(0);", threw("RangeError: call stack over 1000 frames")},
	{"huge result", `return "x".repeat(8 << 20);`, func(err error) bool { return errors.Is(err, handlers.ErrResultTooBig) }},
	{"promise that never settles", "await new Promise(() => {}); return 1;", func(err error) bool { return errors.Is(err, handlers.ErrNotSettled) }},
	{"sort that never ends", "const a = Array.from({length: 1e6}, (_, i) => i); a.sort(() => { for (;;) {} }); return 1;", isDeadline},
	{"object growth", `const v = "v".repeat(10000), o: any = {}; for (let i = 0; ; i++) o["k" + i] = v + i;`, isMemory},
	{"throw {toString: null}", "throw {toString: null};", threw(`{"toString":null}`)},
	{"throw a proxy that throws", "throw new Proxy({}, {get() { throw new Error('gotcha'); }});", plainThrow},
	{"throw a symbol", "throw Symbol('s');", plainThrow},
	{"throw undefined", "throw undefined;", threw("undefined")},
	{"throw an error whose message getter loops", "const e = new Error('x'); Object.defineProperty(e, 'message', {get() { for (;;) {} }}); throw e;", isDeadline},
	{"throw an object whose toJSON throws", "throw {toString: null, toJSON() { throw 1; }};", threw("a thrown value that cannot be shown as text")},
}

func isDeadline(err error) bool { return errors.Is(err, handlers.ErrDeadline) }

// isDeadlineCase reports whether want is isDeadline: such cases run with a short deadline.
func isDeadlineCase(want func(error) bool) bool {
	return fmt.Sprintf("%p", want) == fmt.Sprintf("%p", isDeadline)
}
func isMemory(err error) bool {
	return errors.Is(err, handlers.ErrMemory) && strings.Contains(err.Error(), "SVC_HANDLER_MEMORY_MB")
}

// threw accepts a handler error with exactly message msg.
func threw(msg string) func(error) bool {
	return func(err error) bool {
		var e *handlers.Error
		return errors.As(err, &e) && e.Message == msg
	}
}

// plainThrow accepts a handler error whose message is plain words: no Go value dumped.
func plainThrow(err error) bool {
	var e *handlers.Error
	return errors.As(err, &e) && !strings.Contains(e.Message, "0x") && !strings.Contains(e.Message, "goja") && !strings.Contains(e.Message, "(*")
}

// hostileTimeout is the deadline of the hostile calls: long enough for the ones that grow to
// reach their memory cap first.
const hostileTimeout = 10 * time.Second

func TestHostileHandlers(t *testing.T) {
	pool, err := sandbox.New(sandbox.Config{MemoryMB: 16, MaxProcs: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pool.Close() })
	rssBefore := selfRSS(t)

	// Another agent's handler answers throughout.
	other := newTool(t, "export default async (p: {n: number}) => ({n: p.n + 1});\n", handlers.Options{Sandbox: pool, Key: "other"})
	stop := make(chan struct{})
	var served, failed atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			res, err := other.Call(t.Context(), call(`{"n": `+strconv.Itoa(i)+`}`, nil))
			if err != nil || string(res.Data) != `{"n":`+strconv.Itoa(i+1)+`}` {
				failed.Add(1)
				t.Errorf("the other agent's call %d: %s, %v", i, res.Data, err)
			}
			served.Add(1)
			time.Sleep(5 * time.Millisecond)
		}
	})

	for _, durable := range []bool{false, true} {
		for _, tt := range hostile {
			name := tt.name
			if durable {
				name = "durable " + name
			}
			t.Run(name, func(t *testing.T) {
				ts := "export default async function (p: any, ctx: any) {\n" + tt.body + "\n}\n"
				timeout := hostileTimeout
				if isDeadlineCase(tt.want) {
					timeout = 300 * time.Millisecond
				}
				opts := handlers.Options{Sandbox: pool, Key: "hostile", Timeout: timeout}
				began := time.Now()
				var err error
				if durable {
					h, _ := durableTool(t, ts, `{}`, opts, nil)
					_, _, err = h.RunDurable(t.Context(), call(`{}`, nil), newJournal().handlers())
				} else {
					_, err = newTool(t, ts, opts).Call(t.Context(), call(`{}`, nil))
				}
				took := time.Since(began)
				if !tt.want(err) {
					t.Errorf("error = %v", err)
				}
				// Not a measurement (BenchmarkDeadlineOvershoot is): a bound that only a call
				// the sandbox failed to end would pass, on a loaded machine under -race.
				if took > timeout+20*time.Second {
					t.Errorf("the call took %s against a deadline of %s", took, timeout)
				}
			})
		}
	}
	close(stop)
	wg.Wait()
	if served.Load() == 0 || failed.Load() > 0 {
		t.Errorf("the other agent was served %d calls, %d failed", served.Load(), failed.Load())
	}
	// The runner did not grow with what the handlers took, and no worker kept it.
	if after := selfRSS(t); after > rssBefore+64<<20 {
		t.Errorf("the test process grew from %d MiB to %d MiB", rssBefore>>20, after>>20)
	}
	for _, pid := range pool.PIDs() {
		if rss := pidRSS(pid); rss > 256<<20 {
			t.Errorf("worker %d holds %d MiB after the calls", pid, rss>>20)
		}
	}
}

// Calls stopped at their deadline or their memory cap leave the sandbox serving: the next call
// of the same tool runs in a fresh worker.
func TestSandboxRecoversAfterKills(t *testing.T) {
	pool, err := sandbox.New(sandbox.Config{MemoryMB: 32, MaxProcs: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pool.Close() })
	stuck := newTool(t, "export default async () => /^(a+)+(?!x)$/.test(\"a\".repeat(30) + \"b\");\n",
		handlers.Options{Sandbox: pool, Timeout: 200 * time.Millisecond})
	greedy := newTool(t, "export default async () => { const x = \"x\".repeat(10000), a: any[] = []; for (;;) a.push(x + a.length); };\n",
		handlers.Options{Sandbox: pool, Timeout: 10 * time.Second})
	plain := newTool(t, "export default async () => \"fine\";\n", handlers.Options{Sandbox: pool})
	for round := range 3 {
		if _, err := stuck.Call(t.Context(), call(`{}`, nil)); !isDeadline(err) {
			t.Errorf("round %d regex: %v, want the deadline", round, err)
		}
		if _, err := greedy.Call(t.Context(), call(`{}`, nil)); !isMemory(err) {
			t.Errorf("round %d growth: %v, want the memory cap", round, err)
		}
		if res, err := plain.Call(t.Context(), call(`{}`, nil)); err != nil || res.Content != "fine" {
			t.Errorf("round %d plain call: %q, %v", round, res.Content, err)
		}
	}
	if s := pool.Stats(); s.Procs > 2 || s.KilledMemory != 3 || s.KilledOverran != 3 {
		t.Errorf("pool stats %+v: want at most 2 workers, 3 killed over memory and 3 over their deadline", s)
	}
}

// One agent holds at most MaxPerKey workers: its calls queue for them, and another agent's
// calls still get one.
func TestOneAgentCannotHoldEveryWorker(t *testing.T) {
	pool, err := sandbox.New(sandbox.Config{MaxProcs: 2, MaxPerKey: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pool.Close() })
	slow := newTool(t, "export default async () => { for (;;) {} };\n", handlers.Options{Sandbox: pool, Key: "greedy", Timeout: 400 * time.Millisecond})
	fast := newTool(t, "export default async () => 'ok';\n", handlers.Options{Sandbox: pool, Key: "polite"})
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Go(func() {
			_, err := slow.Call(t.Context(), call(`{}`, nil))
			errs <- err
		})
	}
	time.Sleep(50 * time.Millisecond) // the greedy calls take their one worker and queue
	if res, err := fast.Call(t.Context(), call(`{}`, nil)); err != nil || res.Content != "ok" {
		t.Errorf("the polite agent's call: %q, %v", res.Content, err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !isDeadline(err) {
			t.Errorf("greedy call: %v, want its deadline (run, or spent waiting)", err)
		}
	}
}

// A worker has none of the runner's environment: no keys to read even for code that escaped
// the JavaScript engine.
func TestWorkerEnvironmentIsEmpty(t *testing.T) {
	t.Setenv("SVC_SECRET_KEY", "do-not-leak")
	pool, err := sandbox.New(sandbox.Config{MaxProcs: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pool.Close() })
	h := newTool(t, "export default async () => 1;\n", handlers.Options{Sandbox: pool})
	if _, err := h.Call(t.Context(), call(`{}`, nil)); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pool.PIDs() {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(env), "do-not-leak") || strings.Contains(string(env), "PATH=") {
			t.Errorf("worker environment: %q", strings.ReplaceAll(string(env), "\x00", " "))
		}
	}
}

// BenchmarkDeadlineOvershoot measures how far past its deadline a call that cannot be
// interrupted (a catastrophic regular expression inside a built-in) ends: the sandbox's grace
// plus the kill. It reports the overshoot as ms-past-deadline.
func BenchmarkDeadlineOvershoot(b *testing.B) {
	pool, err := sandbox.New(sandbox.Config{MaxProcs: 2})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = pool.Close() })
	const deadline = 100 * time.Millisecond
	h := newTool(b, "export default async () => /^(a+)+(?!x)$/.test(\"a\".repeat(30) + \"b\");\n", handlers.Options{Sandbox: pool, Timeout: deadline})
	var worst, total time.Duration
	for b.Loop() {
		began := time.Now()
		if _, err := h.Call(context.Background(), call(`{}`, nil)); !isDeadline(err) {
			b.Fatalf("error = %v", err)
		}
		over := time.Since(began) - deadline
		total += over
		worst = max(worst, over)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-past-deadline")
	b.ReportMetric(float64(worst.Milliseconds()), "worst-ms-past-deadline")
}

// selfRSS is this process's resident set in bytes.
func selfRSS(t *testing.T) int64 {
	t.Helper()
	return pidRSS(os.Getpid())
}

func pidRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

var _ = json.Valid
var _ tools.Tool = (*handlers.Tool)(nil)
