// Package telegram is the Telegram side of the messaging channels (CONTRACT §10): it checks the
// secret token Telegram sends with each webhook update, parses updates (messages, forum-topic
// messages, callback queries of inline keyboards), renders replies as sendMessage calls split at
// Telegram's 4,096 UTF-16 code units, and posts them with Client.
//
// Why pure functions over bytes: the route must check the secret before it parses anything and
// answer at once, and the reply is sent later by the durable outbox, maybe by another process.
// Nothing here keeps state or touches the database.
//
// Conversations: a chat is a session, or in a forum supergroup each topic (message_thread_id of a
// topic message) is one. A private chat, a command, a mention of the bot and a reply to the bot
// are Addressed; with the bot's privacy mode on (Telegram's default) a group delivers nothing else.
// Buttons carry the compact callback data of channels.Callback, within Telegram's 64 bytes; the
// option's index, not its value, so that any value fits.
package telegram
