// Package handlers runs the TypeScript handlers of svc/tools tools (spec 2.10, 4.7) in goja,
// inside the worker processes of a sandbox (package sandbox): the runner never parses nor runs
// an agent's JavaScript itself.
//
// The build compiles each handler.ts (or tool.ts) to CommonJS with an inline source map
// (agent.Tool.JS). A Tool sends each call to a worker of its Options.Sandbox (host.go); the
// worker compiles the JavaScript once per version (a digest asked for on first use) and runs the
// call in a fresh goja runtime (engine.go, worker.go), while its host serves what the handler
// asks of the outside: child tools, specialists, the journal of a durable run, the turn's
// attachments (wire.go lists the frames). So ctx.callTool, ctx.callSubagent, logs, labels,
// attachments, every durable method and source-mapped errors behave as they did in process.
//
// Each call runs in a fresh runtime: goja cannot reset one, and globals, prototypes and module
// state a handler changes would carry into the next call, which may belong to another session or
// user. The module is run afresh for every call, so module-level variables start anew.
//
// What bounds a call:
//   - time: every call has a deadline (Options.Timeout, 10 s by default, and the call's ctx). When
//     it passes, the worker interrupts the runtime; a worker that has not answered the sandbox's
//     grace (40 ms) later, because the code sits in a built-in call goja cannot interrupt (a
//     catastrophic regular expression, a sort with a comparator that never returns), is killed
//     and replaced;
//   - memory: a call that grows its worker's heap past the sandbox's cap (SVC_HANDLER_MEMORY_MB)
//     is stopped with an error naming it;
//   - the call stack depth (runaway recursion fails with a RangeError);
//   - the size of the result, and the number and size of log lines of one call.
//
// Handlers are async functions; there is no event loop, timers or I/O in the runtime, so a
// returned promise settles while its jobs run after the call, or never.
//
// A durable execution's journal entries go to the host without waiting for an answer (a step
// costs no round trip); a write the host's Journal refuses stops the execution, and nothing the
// handler does after it (frames, child calls) reaches the outside.
package handlers
