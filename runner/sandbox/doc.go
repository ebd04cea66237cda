// Package sandbox runs code that the platform does not trust (the TypeScript handlers of an
// agent's svc/tools/) in worker processes with hard limits, so that one agent's code cannot take
// the memory or the CPU of the runner that serves every other agent, nor outlive its deadline.
//
// A Pool keeps worker processes of this same executable, started with EnvWorker set, each
// running one call at a time and speaking length-prefixed frames over its standard input and
// output (WriteFrame, ReadFrame), plus a control pipe (its descriptor 3) for what must reach
// it while its code runs, such as a request to stop: the code's own goroutine can then read
// the frames it waits for, with no goroutine in between. What a frame holds is the caller's
// business (package handlers). The pool enforces what the code inside cannot escape:
//
//   - Time. The caller ends a call at its deadline by asking the worker to stop; a worker that
//     has not answered Grace later (code stuck in a built-in call, such as a catastrophic
//     regular expression, which the JavaScript engine cannot interrupt) is killed with SIGKILL
//     and replaced. A call therefore ends within Grace of its deadline, whatever the code does.
//   - Memory. A worker watches its own heap during a call (Worker.Begin) and exits with
//     ExitMemory as soon as the call's heap grows past the cap; the runtime's memory limit makes
//     the garbage collector work hard before that point, so that garbage is not mistaken for
//     growth. The pool also reads each busy worker's resident set from /proc and kills one that
//     passes the cap by more than a margin, and the worker's address space is bounded
//     (RLIMIT_AS), so that even one huge allocation fails in the worker, not in the runner.
//   - CPU. Workers run at a lower scheduling priority (nice 5) than the runner, and a call
//     holds one worker: an agent can keep busy at most MaxPerKey workers at once.
//   - Secrets. A worker starts with an empty environment but for its own settings: the
//     platform's keys, database and provider credentials are not in its memory.
//
// Why processes, and not an engine with a memory cap inside the runner: goja, the engine the
// handlers were written for, has neither a memory cap nor interruptible built-ins; QuickJS
// (modernc.org/quickjs) has both but loses goja's source maps and async functions as they
// behave today; an engine compiled to WebAssembly would cost its start-up per call. A process
// boundary keeps the engine, and is the one limit that also holds for bugs in the engine. The
// price is a round trip over a pipe per call and per thing the code asks of the runner (each
// ctx.callTool of a handler), and about 13 MiB of private memory per warm worker: measured in
// BENCHMARKS.md.
package sandbox
