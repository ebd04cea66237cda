// Package builder turns an agent's source into a bundle: the immutable, content-addressed artifact
// that runners load (DESIGN "Bundles are immutable and content-addressed"), whose format is the
// bundle package's.
//
// Why it is shaped this way:
//
//   - Every source, whatever its origin (a git commit fetched with go-git, a hosted source version
//     read from the object store, any fs.FS), becomes the same immutable in-memory tree first,
//     built under the bundle package's rules and limits (bundle.TreeBuilder), so that what a build
//     accepts is what a runner opens. Nothing is written to disk: a fetch clones into memory,
//     which also means there is no temporary directory to leak.
//   - A git commit is fetched once (FetchCommit: shallow, single branch) and read as much as
//     needed: one file for a push's branch filter (GitCommit.Files), the whole tree for a build
//     (GitCommit.Tree). BranchHead lists a branch's head without fetching, and Credentials
//     resolves an agent's env: reference (its secrets, then the environment) into HTTP auth.
//   - A bundle is deterministic (bundle.Pack), so rebuilding an unchanged commit finds its bundle
//     already stored under the same key and skips the upload.
//   - Build does no database work. It reports steps and log lines through a callback and a Result;
//     the caller (the build task handler in workers) records builds and deployments. Ingest, which
//     validates an upload as a build would and stores it as a source version, is the one function
//     here that writes to the registry.
package builder
