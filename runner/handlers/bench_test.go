package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"svc/agent"
	"svc/agent/agenttest"
	"svc/runner/handlers"
	"svc/runner/sandbox"
	"svc/runner/tools"
)

// BenchmarkCall is one call of a trivial async handler as Call makes it: a round trip to a
// warm sandbox worker, which runs it in a fresh runtime.
func BenchmarkCall(b *testing.B) {
	h := newTool(b, "export default async function (p: {n: number}, ctx: any) {\n  await null;\n  return {n: p.n + 1};\n}\n", handlers.Options{})
	c := tools.Call{ID: "c", Arguments: json.RawMessage(`{"n": 1}`)}
	benchCalls(b, h, c)
}

// BenchmarkCallTriage is one call of the support-desk fixture's triage handler, which calls a
// store tool through ctx.callTool (a second round trip).
func BenchmarkCallTriage(b *testing.B) {
	a, err := agent.LoadDir(agenttest.Dir(b, "support-desk"))
	if err != nil {
		b.Fatal(err)
	}
	set := &setTool{written: func() {}}
	h, err := handlers.New(a.Tools["triage"], sandboxed(handlers.Options{
		Children: func(string) (tools.Tool, error) { return set, nil },
		Subagent: func(context.Context, string, string, json.RawMessage, []tools.Attachment, tools.Call) (string, error) {
			return "yes", nil
		}}))
	if err != nil {
		b.Fatal(err)
	}
	benchCalls(b, h, tools.Call{ID: "c", Arguments: json.RawMessage(`{"customer_id": "c1", "subject": "refund please"}`)})
}

func benchCalls(b *testing.B, h *handlers.Tool, c tools.Call) {
	if _, err := h.Call(b.Context(), c); err != nil { // the worker starts and compiles
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.Call(b.Context(), c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWarmSandboxes measures memory with 50 agents' handlers warm: 50 tools, each a
// different program (a different agent), each called 8 times at once so that every worker of
// the pool (8) has run and compiled each of them. It reports the resident set of this process
// (the runner's side) and of the workers: RSS summed, PSS (shared pages divided among the
// processes that map them) and private memory (what each worker adds).
// Run it with -benchtime 1x. SVC_BENCH_WORKER=bin/svc makes the workers that binary, as in
// production, instead of this test binary.
func BenchmarkWarmSandboxes(b *testing.B) {
	pool, err := sandbox.New(sandbox.Config{MaxProcs: 8, MaxPerKey: 8, Path: os.Getenv("SVC_BENCH_WORKER")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = pool.Close() })
	const agents = 50
	hs := make([]*handlers.Tool, agents)
	for i := range hs {
		hs[i] = newTool(b, fmt.Sprintf("const greeting = %q;\nexport default async function (p: {n: number}) {\n  await null;\n  return {greeting, n: p.n + %d};\n}\n",
			strings.Repeat("hello ", 100)+strconv.Itoa(i), i), handlers.Options{Sandbox: pool, Key: "agent-" + strconv.Itoa(i)})
	}
	for b.Loop() {
		for _, h := range hs {
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					if _, err := h.Call(b.Context(), tools.Call{ID: "c", Arguments: json.RawMessage(`{"n": 1}`)}); err != nil {
						b.Error(err)
					}
				})
			}
			wg.Wait()
		}
	}
	runtime.GC()
	var rss, pss, private int64
	pids := pool.PIDs()
	for _, pid := range pids {
		rss += pidRSS(pid)
		pss += smaps(pid, "Pss:")
		private += smaps(pid, "Private_Clean:") + smaps(pid, "Private_Dirty:")
	}
	b.ReportMetric(float64(pidRSS(os.Getpid()))/(1<<20), "runner-MiB")
	b.ReportMetric(float64(len(pids)), "workers")
	b.ReportMetric(float64(rss)/(1<<20), "workers-RSS-MiB")
	b.ReportMetric(float64(pss)/(1<<20), "workers-PSS-MiB")
	b.ReportMetric(float64(private)/(1<<20), "workers-private-MiB")
}

// smaps is a field of a process's smaps_rollup in bytes ("Pss:", "Private_Dirty:"), 0 when
// unknown.
func smaps(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
