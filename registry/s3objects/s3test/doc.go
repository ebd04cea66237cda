// Package s3test gives tests a real S3 server: an external one named by
// SVC_TEST_S3_ENDPOINT, or a versitygw process (posix backend, data in a
// temporary directory) started on a free loopback port for one test and
// stopped at its cleanup.
//
// A real server rather than a fake, because the promises that matter
// (atomic uploads, multipart, server-side copy, error codes) are the
// server's, and a fake would only test our idea of them. versitygw is used
// because it installs from the Go module proxy in about a minute and starts
// in a tenth of a second; scripts/s3server.sh installs it. Each caller gets
// a fresh bucket (FreshBucket), so tests never see each other's objects,
// even on a shared external server.
package s3test
