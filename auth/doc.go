// Package auth owns the credentials of svc: platform automation tokens (pk_, of kind observer,
// operator or admin, optionally bound to one agent), agent API keys (ak_, which can never control
// deployments) and short-lived runtime tokens (signed JWTs checked without a database look-up).
//
// Only SHA-256 hashes of pk_ and ak_ values are stored; a value is shown once, when it is made.
package auth
