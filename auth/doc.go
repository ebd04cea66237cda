// Package auth owns the credentials of svc: platform automation tokens (pk_, of kind observer,
// operator or admin, optionally bound to one agent), agent API keys (ak_, which can never control
// deployments) and short-lived runtime tokens (signed JWTs checked without a database look-up).
//
// Only SHA-256 hashes of pk_ and ak_ values are stored; a value is shown once, when it is made.
// Storing them is registry's (registry.Tokens, registry.APIKeys, over the tokens and api_keys
// tables): auth makes values, hashes and verifies them and knows no database, so that a runtime
// can check credentials without one.
package auth
