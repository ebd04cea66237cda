package registry

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"

	"gorm.io/gorm"
)

// ErrBadCursor is returned for a cursor that is malformed, or that was not made by the same list
// of the same agent.
var ErrBadCursor = errors.New("registry: bad cursor")

// The lists a Cursor can belong to.
const (
	CursorSessions = "sessions"
	CursorFeedback = "feedback"
	CursorRuns     = "runs"
	// CursorDeployments pages an agent's deployments by createdAt.
	CursorDeployments = "deployments"
)

// Cursor is a place in one agent's list (List: one of the Cursor* constants) ordered newest first
// by (At, ID), where At is the list's time (a session's updatedAt, a feedback's createdAt, a
// run's startedAt): the page after it holds the items strictly older than (At, ID). It carries
// the position itself, not only the last item's id, so a page never depends on that item still
// existing or keeping its time (a session's updatedAt moves with each turn), and items added
// while paging, all newer than the cursor, never enter later pages. The zero Cursor is the
// start of a list.
type Cursor struct {
	List    string
	AgentID string
	At      time.Time
	ID      string
}

// IsZero reports whether c is the start of a list.
func (c Cursor) IsZero() bool { return c == Cursor{} }

// cursorJSON is the wire form of a Cursor, base64url-encoded so that it is opaque and safe in a
// query string.
type cursorJSON struct {
	List    string    `json:"l"`
	AgentID string    `json:"a"`
	At      time.Time `json:"t"`
	ID      string    `json:"i"`
}

// String is the opaque form of c that ParseCursor reads back ("" for the zero Cursor).
func (c Cursor) String() string {
	if c.IsZero() {
		return ""
	}
	b, err := json.Marshal(cursorJSON{List: c.List, AgentID: c.AgentID, At: c.At.UTC(), ID: c.ID})
	if err != nil {
		panic("registry: encode cursor: " + err.Error()) // strings and a UTC time always encode
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// ParseCursor reads a cursor that Cursor.String wrote; anything else is ErrBadCursor.
func ParseCursor(s string) (Cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, ErrBadCursor
	}
	var w cursorJSON
	if err := json.Unmarshal(b, &w); err != nil || w.List == "" || w.AgentID == "" || w.ID == "" || w.At.IsZero() {
		return Cursor{}, ErrBadCursor
	}
	return Cursor{List: w.List, AgentID: w.AgentID, At: w.At.UTC(), ID: w.ID}, nil
}

// pageLimit is the number of items a page of limit holds: 1..500, 100 when limit is 0 or less.
func pageLimit(limit int) int {
	if limit <= 0 {
		return 100
	}
	return min(limit, 500)
}

// wherePage narrows tx, a list of agentID's list ordered by (timeCol DESC, id DESC), to the
// items after before, and asks for one item more than a page of limit holds, so that the caller
// knows whether a next page exists (nextCursor). A cursor of another list or agent is
// ErrBadCursor: it must never page someone else's items. The row comparison is an index range
// on (agent_id, timeCol, id) in both dialects (migration 00014).
func wherePage(tx *gorm.DB, list, agentID, timeCol string, before Cursor, limit int) (*gorm.DB, error) {
	if !before.IsZero() {
		if before.List != list || before.AgentID != agentID {
			return nil, ErrBadCursor
		}
		tx = tx.Where("("+timeCol+", id) < (?, ?)", before.At.UTC(), before.ID)
	}
	return tx.Order(timeCol + " DESC, id DESC").Limit(pageLimit(limit) + 1), nil
}

// nextCursor trims items, fetched by wherePage, to a page of limit and returns the cursor of the
// page after it: the zero Cursor when there is none. key gives an item's time and id.
func nextCursor[T any](items []T, list, agentID string, limit int, key func(*T) (time.Time, string)) ([]T, Cursor) {
	n := pageLimit(limit)
	if len(items) <= n {
		return items, Cursor{}
	}
	items = items[:n]
	at, id := key(&items[n-1])
	return items, Cursor{List: list, AgentID: agentID, At: at, ID: id}
}
