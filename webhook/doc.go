// Package webhook turns the push webhooks of git hosts (GitHub, Gitea and
// Forgejo, GitLab) into one host-neutral push event.
//
// Why a package of its own: the three hosts describe the same fact ("this
// ref of this repository now points at that commit") with different
// headers, field names and signature schemes. Keeping the translation here,
// with one parser per host and real payloads as fixtures, lets the API layer
// deal with a single Push value and a single Verify call, and lets the
// parsers be fuzzed without a server around them.
//
// The intended order for a request is: read the raw body (at most
// MaxPayloadBytes), Verify it when the agent has a webhook secret, then
// Parse. Verify works on the raw bytes because a signature covers the exact
// body the host sent; re-encoding parsed JSON would not reproduce it.
//
// Parse returns one of three outcomes (see EventKind): a push to act on, a
// ping that only needs a 200, or an event the service does not care about
// (a typed "ignored" outcome, not an error). Errors are kept for requests
// that are malformed: an unknown host, a request without an event header, a
// body that is not JSON, or a push that lacks a field the service needs.
// Payload errors are *PayloadError values naming the offending JSON field.
//
// NormalizeRepoURL and RepoURLs exist so that the caller can find the agent
// whose git source matches a payload, whatever URL form (HTTPS, scp-like
// SSH, ssh://, web URL) either side uses.
//
// The package depends only on the standard library and holds no state.
package webhook
