// Package engine owns durable runs: it starts them, executes them under a fenced lease, parks
// them at their pauses, records answers, wakes them at their times, applies their timeouts and
// publishes their changes (spec 2.8, 3.2, 4.7; CONTRACT §6).
//
// A process builds one Engine (cmd/svc) and hands it to its runtimes. A run belongs to the
// deployment that started it, and only that deployment's bundle can execute its handler, so each
// runtime attaches what the engine needs of its deployment (Attach) when it is created and
// detaches it when it closes; a run whose deployment is not attached here (an answer that reached
// a newer deployment, a wake-up on a fresh worker) is resumed after loading its deployment with
// the loader given to Start, which attaches it in turn. Nothing else ties runtimes together.
//
// The engine has the lifecycle of asynq's components: New, Start, then Shutdown, which refuses
// new executions, waits for those in flight, and past its ctx interrupts them. An interrupted
// execution stores no outcome: its run stays running under its lease and resumes from its journal
// at the lease's wake-up (package durable explains the journal and the fencing). Without a
// Schedule (svc dev) wake-ups are timers of the process, which Shutdown stops: such runs wait for
// a later Wake.
package engine
