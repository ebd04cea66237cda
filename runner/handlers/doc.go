// Package handlers runs the TypeScript handlers of svc/tools tools (spec 2.10, 4.7) in goja.
//
// The build compiles each handler.ts (or tool.ts) to CommonJS with an inline source map
// (agent.Tool.JS). New compiles that JavaScript once into a goja program, shared by every call of
// the tool; a Cache shares it between runtimes that load the same version.
//
// Each call runs in a fresh goja runtime. Measured on the 2-core development machine
// (go test -run '^$' -bench . -benchtime 2s -count 3 ./runner/handlers/), a call of a trivial async
// handler costs 80-92 µs, 74 KiB and 937 allocations in a fresh runtime, against 44-62 µs, 37 KiB
// and 502 allocations in a runtime reused from a sync.Pool. The 35-40 µs saved are small next to a
// model turn, and goja cannot reset a runtime: globals, prototypes and module state a handler
// changes would carry into the next call, which may belong to another session or user. Isolation
// wins; the module is also run afresh for every call, so module-level variables start anew.
//
// goja has no memory cap and runs JavaScript on the calling goroutine. What is bounded:
//   - time: every call has a deadline (Options.Timeout, 10 s by default, and the call's ctx); when
//     it passes, the runtime is interrupted, even inside an endless loop or a promise job;
//   - the call stack depth (runaway recursion fails with a RangeError);
//   - the size of the result, and the number and size of log lines of one call.
//
// A handler that allocates without bound inside its deadline is not stopped before the deadline.
//
// Handlers are async functions; there is no event loop, timers or I/O in the runtime, so a
// returned promise settles while its jobs run after the call, or never. ctx methods that reach
// outside the handler (composition and durable execution) are not bound yet: they throw.
package handlers
