// Package builder turns an agent's source into a bundle: the immutable, content-addressed artifact
// that runners load (DESIGN "Bundles are immutable and content-addressed").
//
// Why it is shaped this way:
//
//   - Every source, whatever its origin (a git commit fetched with go-git, a hosted tar.gz, a JSON
//     map of files, any fs.FS), becomes the same immutable in-memory tree first. The rules that
//     keep a tree safe live in one place (treeBuilder): no absolute paths or ".." elements, no
//     links out of the tree, no special files, and the size and count limits of CONTRACT §5,
//     checked before content is read. A symbolic link to a file inside the tree is resolved into
//     a copy of that file, so the tree holds regular files and folders only; a link to a folder is
//     refused. Nothing is written to disk: a fetch clones into memory, which also means there is
//     no temporary directory to leak.
//   - The tree's Digest ("sha256:" over sorted paths, sizes and content hashes) names a source
//     version independent of archive order, timestamps and modes, so the same files uploaded twice
//     give the same digest (CONTRACT §3).
//   - A bundle is deterministic: the same tree, commit, branch and source version give the same
//     bytes, hence the same object key bundles/<agent>/<sha256 of the bytes>.tar.zst. Rebuilding
//     an unchanged commit therefore finds its bundle already stored and skips the upload, and a
//     runner can verify what it loads against its key.
//   - Build does no database work. It reports steps and log lines through a callback and a Result;
//     the caller (the build worker) records builds and deployments. This keeps the package usable
//     by the API (validating a hosted upload), the workers and the CLI alike.
//
// Bundle layout (format "svc-bundle/1"): a zstd-compressed tar whose entries, in byte order, are
// build/tools/<tool>.js (CommonJS compiled by esbuild in agent.Load, with an inline source map),
// manifest.json (see Manifest) and src/<path> for every file of the source tree.
package builder
