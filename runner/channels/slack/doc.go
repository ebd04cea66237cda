// Package slack is the Slack side of the messaging channels (CONTRACT §10): it verifies Slack's
// v0 request signatures, parses the Events API (app_mention and message events) and interactive
// block_actions payloads, renders replies as chat.postMessage calls in the thread they answer,
// and posts them with Client.
//
// Why pure functions over bytes: the route must verify the raw body before it parses anything
// and answer within Slack's 3 seconds, and the reply is sent later by the durable outbox, maybe by
// another process. Nothing here keeps state or touches the database; the route and the outbox
// call Verify, Parse, Render, RenderAck and Client.Send in that order.
//
// Conversations: a thread is a session. A top-level message starts a thread (its ts becomes the
// thread_ts of the reply), so every mention in a channel is its own conversation and every reply
// in its thread continues it. A channel message that does not mention the agent is not Addressed:
// the caller continues the thread's session if there is one and ignores it otherwise. Because
// mentioning the agent in a channel delivers both app_mention and message events, the message
// event that mentions the agent is Ignored and app_mention alone starts the turn.
package slack
