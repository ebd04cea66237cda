package stores

import "context"

// sessionKey is the context key of the session id a store tool records in traces.
type sessionKey struct{}

// WithSession returns ctx carrying the id of the chat session whose run calls the store
// tools. The runtime sets it on the context of each run (before loop.Run), so that a write to a
// store with "trace": true records the session; without it the trace names the tool call only.
func WithSession(ctx context.Context, sessionID string) context.Context {
	return context.WithValue(ctx, sessionKey{}, sessionID)
}

// SessionFrom returns the session id WithSession put in ctx, or "".
func SessionFrom(ctx context.Context) string {
	id, _ := ctx.Value(sessionKey{}).(string)
	return id
}
