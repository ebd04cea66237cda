// Package dbqueue is the workers.Queue of `svc up`: jobs are rows of the `jobs` table, in the same
// SQLite (or Postgres) database as everything else, so the embedded platform needs no Redis and
// a restart or a crash loses no job.
//
// How it keeps the Queue contract:
//
//   - Claiming is one atomic UPDATE ... WHERE id = (SELECT ... LIMIT 1) RETURNING. On Postgres the
//     subquery takes FOR UPDATE SKIP LOCKED, so concurrent workers never wait on each other. SQLite
//     has no row locks and needs none: it serialises writers, so the statement is atomic as a whole.
//   - A claimed job is leased (Config.Lease) to one claim (worker_id is unique per claim). A heartbeat
//     goroutine per running job extends the lease every Lease/3; when it finds the lease taken over,
//     it cancels the handler's ctx. A job whose lease expired (its process was killed) is claimable
//     again by the same UPDATE, which counts the lost run as an attempt; a job lost on its last
//     attempt fails with workers.ErrWorkerLost instead of running again.
//   - A restarted owner takes back its dead predecessor's claims at once (Config.Instance). Each
//     claim's worker_id records the instance (`svc up` uses its data dir's absolute path), the host
//     (name and boot id) and the pid. When Run starts, the running claims of the same instance and
//     host whose process is gone (kill(pid, 0) says ESRCH) get their lease ended now, so the claim
//     loop takes them over at once, as after an expired lease. Another instance's claims, or a live
//     process's, wait out their lease; a reused pid only makes a claim wait for its lease.
//   - Dedupe is a unique index on unique_key over queued and running rows, so it holds across
//     processes and races; finished rows free their key.
//   - Every bookkeeping update is conditional on the claim still being ours (worker_id and state),
//     so a worker that lost its lease cannot overwrite the newer run's outcome.
//   - Enqueue wakes the Run loops of the same Queue value at once; other processes find the job at
//     their next poll (Config.PollInterval).
//
// Finished jobs (done and failed) are kept for Config.Retention (default 24h) for inspection, then
// deleted by a sweep that Run performs when it starts and once a minute. The durable record of a
// build is the builds table, not this one.
//
// Times are written as UTC from this process's clock; with several processes on one Postgres,
// their clocks must agree to well within the lease.
package dbqueue
