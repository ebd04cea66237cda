// Package channels holds what the messaging channels of CONTRACT §10 share: the inbound Message
// and Action a platform delivery becomes, the outbound Part a reply is made of, the Request a
// sender posts, and the errors every platform uses.
//
// Why a package of its own, with one sub-package per platform (slack, telegram, webhook): Slack,
// Telegram and a signed generic webhook describe the same facts (someone wrote in a thread,
// someone pressed a button, the agent answers) with different signatures, payloads and limits.
// Each platform package does exactly three pure things, with no database and no state:
//
//   - Verify the raw body and headers before anything is parsed (every failure wraps
//     ErrUnauthorized and says why: missing header, stale timestamp, bad signature, wrong secret);
//   - Parse a verified body into an Event: a Challenge (Slack's url_verification), a *Message, an
//     *Action (a button press) or Ignored (bots, edits, joins, anything that needs no turn);
//   - Render the parts of a reply, or the acknowledgement of a button press, into the Requests of
//     the platform's API, split at the platform's limits.
//
// A Client per platform posts one Request and answers a *SendError that tells the durable outbox
// what to do: wait RetryAfter (429), retry with backoff (5xx, network), or give up (other 4xx).
// Requests are plain JSON values so the outbox can store them before they are sent; the
// idempotency key of each is the outbox's, sent as X-Svc-Idempotency-Key.
//
// The wiring (the runtime's routes, the durable dedupe of DeliveryID, the outbox, the queue
// tasks) lives elsewhere and calls these packages; channelstest holds fake Slack and Telegram
// APIs and signed deliveries for its tests and theirs.
package channels
