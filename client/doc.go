// Package client is the Go client of the svc platform API and of an agent's runtime chat stream.
//
// The svc binary's client commands (deploy, logs, status, promote, rollback, activate, token, chat)
// are thin layers over this package, and tests or scripts that drive a running platform use it the
// same way. It speaks only the wire shapes of CONTRACT §3 and spec §6.1, so it imports nothing of
// the server's own packages: the client and the server meet at the HTTP contract, not at Go types.
//
// Two details shape the package:
//   - Every error answer of the platform is turned into a *Error carrying the HTTP status, the
//     UPPER_SNAKE code, the message and, for a refused source upload, every problem. Callers branch
//     on Code with errors.As.
//   - One listener serves both the platform and the agents (CONTRACT §2), and `*.localhost` names do
//     not always resolve outside browsers. ChatStream therefore always connects to the platform's
//     address and names the agent only in the request's Host (and TLS server name), so agent URLs
//     work without DNS.
package client
