package turn

import (
	"errors"
	"fmt"
)

// Kind says why a turn was refused; the runtime answers each with its own code and status.
type Kind int

// Kinds of refusal.
const (
	// Invalid is a request field at fault (Error.Field names it).
	Invalid Kind = iota + 1
	// Busy is a session that already runs a turn.
	Busy
	// SessionFull is a message over the session's storage bound.
	SessionFull
	// AgentFull is a message over the agent's storage bound.
	AgentFull
	// NotFound is a session that is missing, another agent's, or hidden from the Caller: the
	// same answer for each (spec 4.6 rule 2).
	NotFound
	// NoActiveTurn is a queued message for a session with no turn here accepting messages.
	NoActiveTurn
)

// Error is a turn or a session operation refused before anything ran; nothing was stored.
type Error struct {
	Kind  Kind
	Field string // for Invalid
	// Message says why; "" for NotFound and NoActiveTurn, which say nothing more than their Kind.
	Message string
}

// Error implements error.
func (e *Error) Error() string {
	switch {
	case e.Message == "" && e.Kind == NotFound:
		return "turn: session not found"
	case e.Message == "" && e.Kind == NoActiveTurn:
		return "turn: no turn of this session is accepting messages"
	}
	if e.Field != "" {
		return "turn: " + e.Field + ": " + e.Message
	}
	return "turn: " + e.Message
}

// invalid is an Error naming field.
func invalid(field, format string, args ...any) *Error {
	return &Error{Kind: Invalid, Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}

// BlockedError is a message refused by the agent's preInput guardrail (Config.Guard): nothing
// was stored.
type BlockedError struct {
	// Rule is the block pattern that matched, counted from 0.
	Rule int
}

// Error implements error.
func (e *BlockedError) Error() string {
	return fmt.Sprintf("the message matches block rule %d of the agent's preInput guardrail (svc.json guardrails.preInput.block[%d]); nothing was stored", e.Rule+1, e.Rule)
}

// ErrLockLost is the cancellation cause of a turn whose session lock was lost.
var ErrLockLost = errors.New("turn: the session's turn lock was lost")
