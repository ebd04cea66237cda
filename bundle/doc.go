// Package bundle owns the formats an agent's source takes on its way to a runner: the immutable
// source tree every origin becomes (Tree, built by a TreeBuilder under Limits), the source
// archive of hosted source versions (ReadTarGz, WriteTarGz), and the bundle, the immutable,
// content-addressed artifact that runners load (DESIGN "Bundles are immutable and
// content-addressed"): Pack, Read and Unpack, the Manifest, and the object Key.
//
// Why these live together, at the bottom of the graph (bundle depends on agent only):
//
//   - A bundle's src/ folder is a source tree and its manifest records the tree's Digest, so
//     reading a bundle is building a tree under the same rules as reading an upload or a git
//     commit. The rules that keep a tree safe live in one place (TreeBuilder): no absolute paths
//     or ".." elements, no links out of the tree, no special files, and the size and count limits
//     of CONTRACT §5, checked before content is read. A symbolic link to a file inside the tree is
//     resolved into a copy of that file, so a tree holds regular files and folders only; a link to
//     a folder is refused. Trees live in memory: nothing is written to disk.
//   - The tree's Digest ("sha256:" over sorted paths, sizes and content hashes) names a source
//     version independent of archive order, timestamps and modes, so the same files uploaded twice
//     give the same digest (CONTRACT §3).
//   - A bundle is deterministic: the same tree, commit, branch and source version give the same
//     bytes, hence the same object key bundles/<agent>/<sha256 of the bytes>.tar.zst (Key).
//     Rebuilding an unchanged commit therefore finds its bundle already stored, and a reader
//     verifies what it loads against its key.
//   - The builder writes bundles, and the API and the runners open them; none of them needs the
//     others for that, and the object store stays theirs: Read takes the stored object's content,
//     not a store.
//
// Bundle layout (format "svc-bundle/1"): a zstd-compressed tar whose entries, in byte order, are
// build/tools/<tool>.js (CommonJS compiled by esbuild in agent.Load, with an inline source map),
// manifest.json (see Manifest) and src/<path> for every file of the source tree.
package bundle
