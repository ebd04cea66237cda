// Package workers runs svc's background jobs through one small Queue interface with two
// implementations. Today the one task is the build (TaskBuild, handled by BuildHandler); evals
// and durable wake-ups are to come as tasks of their own.
//
//   - workers/asynqqueue: asynq on Redis, for the scale-out `svc worker` role, where any worker
//     process may die and another carries on;
//   - workers/dbqueue: jobs as rows of the database (SQLite or Postgres), for `svc up`, so the
//     embedded platform needs no Redis and a restart loses no job.
//
// Why one interface: the handlers must not know which queue carries them,
// and the guarantees they rely on must be the same on both. Those guarantees are written once, on
// Queue, and checked once, by the conformance suite in workers/queuetest, which both
// implementations run: at-least-once delivery, dedupe by task ID, exponential retry with a cap,
// the task's own handler told when the task gives up, panics turned into failures, and recovery
// of a task whose worker was killed mid-run (a real SIGKILL of a child process in the suite).
//
// Because delivery is at-least-once, every handler must be idempotent: a task can run again after
// its worker died, after a lease was lost, or when the failure bookkeeping itself failed.
//
// Each handler owns its failures. A handler's last attempt cannot always say so itself (it may
// panic, time out, or die with its worker), so a handler that has something to clean up when its
// task gives up (a build to mark failed) is a FailureHandler: the queue tells it, through the
// ServeMux that routes its tasks, with the last attempt's error. There is no queue-wide hook, so a
// queue is built without knowing its handlers.
//
// What lives here: Task, Handler, FailureHandler, ServeMux (routing by task type, with panic
// recovery), the enqueue options, the shared backoff (RetryDelay), the sentinel errors, and the
// build task: NewBuildTask, its handler (BuildHandler: fetch, build, record), RecoverBuilds, and
// what a build and the decision to start one both need to know of an agent (AgentSource, Sources,
// RegistrySources) and the two ways a push's fetched commit reaches its build without a second
// fetch: in the process that fetched it, the cache CommitCache; on another worker, the tree the push
// stored in the object store, which the task names (NewPushBuildTask; a push's build whose task
// does not, one RecoverBuilds queued again, looks at its commit's key all the same) and the build
// reads, then deletes once it finished (succeeded, failed, or gave up: the object lives as long as
// the build). A build that finds neither, or a stored tree it cannot read, fetches the commit and says
// so in its log: the stored tree is an optimisation, never the only copy. That decision, the push and redeploy policy, is package deploy, which enqueues
// builds here.
//
// Automations (CONTRACT §9) fire through the same queue. The Scheduler scans the automations due
// and claims each fire in the database before it enqueues its task (TaskAutomationFire): the
// fire's primary key, not the queue, is what makes one fire per (automation, fire time) however
// many Schedulers tick, and a fire claimed whose task was lost is enqueued again after
// StaleAfter. The AutomationFireHandler starts a fire only from queued, so a fire delivered twice
// runs once, and a retry that finds its fire running marks it interrupted rather than run it
// again; Run, the turn itself, is given by cmd/svc.
//
// Implementations live in sub-packages named for their backend; the choice between them is made
// in cmd/svc.
package workers
