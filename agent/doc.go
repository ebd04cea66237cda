// Package agent reads an agent's source tree (a folder, a git commit, an uploaded archive or a
// bundle: anything behind an fs.FS) into a typed, validated Agent.
//
// Every other part of svc works from this model instead of from files: the builder validates and
// packs it, the runner serves it. Validation therefore happens once, here, and it is exhaustive:
// Load reports every problem of a tree at once (Problems), each with its file and line, so that an
// author fixes a broken build in one round instead of one error at a time. JSON files are decoded
// strictly (unknown fields and wrong types are problems), names given in one file are checked
// against the files that define them, and TypeScript handlers are compiled with esbuild, so a tree
// that loads without problems is one the runner can serve.
//
// The tree is untrusted input: paths that escape it, symbolic links that leave it, oversized files
// and oversized trees are refused before anything is read. Secrets are never in the tree; values
// such as "env:NAME" are kept as written and resolved by whoever runs the agent.
package agent
