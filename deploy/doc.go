// Package deploy decides what a push or a redeploy builds (spec 3.1) and starts those builds.
//
// It is the policy the API calls synchronously, between a request and the queue: which
// environment a branch builds (EnvironmentFor), which pushes build at all (autoDeploy, tags,
// deleted branches, the ci.deploy.branches filter of the pushed commit's svc.json), when an
// existing build is reused instead of a new one (a duplicate push, a reuseBuild redeploy), and
// which commit a redeploy builds (the branch head, or a hosted source version). What it starts is
// recorded in the registry and handed to the build queue; the build itself runs in
// workers.BuildHandler, on any worker process.
//
// Why a package of its own: the API answers pushes and redeploys and the workers run builds, often
// in different processes (svc api, svc worker). The policy needs the queue to start builds, and
// the build handler needs none of the policy, so the policy sits above workers and the API
// depends on it instead of on the workers.
//
// The branch filter reads svc.json of the pushed commit alone (builder.GitCommit.Files), through
// the one parser of ci.deploy (agent.DeployFilterOf). The commit it fetched goes on to the build, so
// that a push fetches its commit once: when the process also runs builds (svc up), in memory
// through a workers.CommitCache; otherwise (svc api, builds on svc worker processes) as a source
// archive in the object store (Config.Objects, builder.StoreCommit, registry.CommitSourceKey) that
// the build task names (workers.NewPushBuildTask) and the build reads, then deletes. Why two ways:
// the object store costs svc up a write with fsync per push (~8 ms) for a hand-over that memory
// does for free; between processes the object store is the one place both reach. A push that
// builds nothing (filtered, already built) stores nothing. A redeploy resolves the branch head
// with ls-remote and fetches nothing, so its build fetches.
//
// # Lifecycle
//
// Lifecycle changes what an environment serves: activate, promote and rollback. The registry makes
// each change one transaction under the environment's lock; what comes before it is policy and
// lives here: the bundle about to be made active is first opened as a runner would
// (builder.OpenStored), so an environment never switches to a deployment that cannot serve, and a
// promotion of a git source's commit waits for its svc/evals status (the gate) unless forced. Its
// errors are typed (BundleError, NotBuiltError, ErrNothingToPromote, and the registry's
// sentinels) for the API to map to its codes.
//
// # Evals
//
// Evals is when evals run and where their outcome goes: a build that makes a git commit's
// deployment ready queues the agent's evals, holding the commit's svc/evals status pending so that
// the gate waits for them; each status is also posted to the agent's git host (githost) when the
// agent has a token for it. The run itself is the evals package's (evals.RunAgent) on a runtime
// cmd/svc builds, in the eval task handler of workers.
package deploy
