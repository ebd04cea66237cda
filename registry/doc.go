// Package registry owns what the platform keeps about built agents: the
// object storage that holds bundles, and (in other files) bundles and
// deployments with their state machine.
//
// Object storage is the Objects interface in objects.go: a flat store of
// byte objects under slash-separated keys such as
// "bundles/<agent>/<digest>.tar.zst". It is deliberately small (Put, Get,
// Stat, Copy, Delete, List) so that two very different backends can keep
// the same promises: fsobjects, a directory tree for the embedded `svc up`,
// and s3objects, an S3 bucket for scaled-out deployments. What both must
// do is written once, as the contract on Objects, and checked once, by the
// conformance suite in objectstest that each backend runs.
//
// Rules that do not depend on the backend (which keys are valid, a done
// ctx, Put's declared size) live in one wrapper, Checked, in the manner of
// distribution's storage driver base: every constructor's caller wraps the
// backend with it, so no backend validates keys itself and none can drift.
// The key rules exist so that one key means one object everywhere: on a
// filesystem a key cannot escape the root or alias another key, and an S3
// server accepts it unchanged.
//
// Atomic Put matters because runners load bundles while workers write
// them: a runner must never execute half a bundle. Backend errors are
// translated at the boundary (ErrNotFound for a missing object), so callers
// branch with errors.Is and never see a backend's error types.
package registry
