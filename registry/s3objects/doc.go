// Package s3objects implements registry.Objects on one S3 bucket through
// minio-go, for deployments that run several api, worker and runner
// processes (compose.yaml runs MinIO; tests run versitygw).
//
// S3 already gives the contract's hard parts: an object becomes visible
// only when its upload completes, whole, and Copy is a server-side
// CopyObject, so bundles promoted between environments never travel
// through this process. What this package adds is the translation at the
// boundary: S3 error codes for a missing key or bucket become
// registry.ErrNotFound, and failures caused by a done ctx wrap its error,
// so callers never see minio types.
//
// A Put of unknown size is a multipart upload with 5 MiB parts (S3's
// minimum), so memory stays at one part per Put; minio-go aborts the upload
// when the Put fails, leaving no object. A single CopyObject is limited to
// 5 GiB, far above any bundle.
//
// Subpackage s3test starts a real S3 server for tests.
package s3objects
