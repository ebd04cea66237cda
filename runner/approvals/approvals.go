// Package approvals keeps the approvals of tool calls that wait for the user (CONTRACT §7,
// Approvals): a chat's turn records one, streams confirmation_required, and waits; the answer
// (POST /chat/sessions/{id}/ask-user-response) may arrive at any runtime of the agent, in this
// process or another one, and wakes the turn.
//
// A Store keeps the records where every runtime sees them: Memory for one process (svc dev),
// DB in the platform database. A Hub wakes the waiting turn: at once when the answer arrives in
// the same process; through Redis pub/sub when the Hub has a Redis client (the platform's
// runners share REDIS_URL); and by reading the record every PollInterval otherwise.
//
// Each approval is decided once: the first of the user's answer, the timeout (expired, which
// denies) and the end of the turn (cancelled) wins, and the others find it decided.
package approvals

import (
	"context"
	"errors"
	"time"
)

// Statuses of an approval.
const (
	Pending   = "pending"
	Approved  = "approved"
	Denied    = "denied"
	Expired   = "expired"   // no answer came in time: denied
	Cancelled = "cancelled" // the turn ended (its client left) before an answer
)

// DefaultTimeout is how long a call waits for its approval (SVC_APPROVAL_TIMEOUT).
const DefaultTimeout = 10 * time.Minute

// Errors of a Store.
var (
	ErrNotFound = errors.New("approvals: no such approval")
	ErrDecided  = errors.New("approvals: already decided")
)

// Approval is one call waiting for the user.
type Approval struct {
	ID        string
	AgentID   string // "" under svc dev
	SessionID string
	ToolName  string
	ToolID    string
	Status    string
	CreatedAt time.Time
	ExpiresAt time.Time
	DecidedAt time.Time // zero while pending
}

// Store keeps approvals. Implementations are safe for concurrent use.
type Store interface {
	// Create records a pending approval.
	Create(ctx context.Context, a Approval) error
	// Get returns the approval of id.
	Get(ctx context.Context, id string) (Approval, error)
	// Decide moves the pending approval id of the session to status (approved, denied, expired
	// or cancelled) and returns it. ErrNotFound when the session has no approval of that id (of
	// that agent); ErrDecided, with the approval as it stands, when it is decided already.
	Decide(ctx context.Context, agentID, sessionID, id, status string, at time.Time) (Approval, error)
}
