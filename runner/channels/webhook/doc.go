// Package webhook is the signed generic webhook of the messaging channels (CONTRACT §10): any
// system that can sign a JSON POST talks to an agent as Slack and Telegram do, and gets its
// replies as signed JSON POSTs to its replyUrl.
//
// Why the same signature as the event trigger of CONTRACT §9: one scheme to document and to
// implement on the sender's side. X-Svc-Signature is "sha256=" + hex HMAC-SHA256 of
// "<X-Svc-Timestamp>.<raw body>", the timestamp unix seconds within 5 minutes of now. The
// replies this package sends are signed the same way with the same secret, and carry the
// idempotency key as X-Svc-Event-Id, so the receiver can verify and dedupe them with the code it
// already has.
//
// An inbound body is {"id", "conversation"?, "user"?, "text"} for a message, or {"id",
// "conversation"?, "user"?, "action": {"type": "approval", "id", "approved"} | {"type":
// "choice", "id", "option"}} to answer a prompt. "id" is the dedupe key; "conversation" names
// the session (each delivery is a conversation of its own without it).
package webhook
