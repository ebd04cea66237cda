// Package streams holds the per-turn frame logs that let a client reattach to a chat turn
// (CONTRACT §11): every frame of a streamed turn, numbered 1..n as its SSE id, kept while the
// turn runs and Retention after its done frame. Backends: memstream (one process, svc up and
// svc dev) and redisstream (runners sharing Redis, so that any runner serves a reconnect).
package streams

import (
	"errors"
	"time"
)

// Retention is how long a turn's log is kept after its end.
const Retention = 5 * time.Minute

// ErrNoTurn is returned by a Read of a session with no turn logged in the last Retention.
var ErrNoTurn = errors.New("streams: no turn of the session in the last 5 minutes")

// Entry is one frame of a turn: its SSE id and its JSON.
type Entry struct {
	ID   int64
	Data []byte
}

// Batch is what one Read returns: the frames after the id asked for, in id order, and whether
// the turn has ended (no frame follows the last of Entries). Turn names the turn read.
type Batch struct {
	Turn    string
	Entries []Entry
	Done    bool
}

// Writer appends the frames of one turn to its log. Append and Close are called by the turn
// only, one at a time; Append must not block on I/O for long (a backend may batch), and data
// is only valid during the call. Close marks the turn ended, starts its Retention and releases
// the turn's stop function; it must be called once, also when the turn fails.
type Writer interface {
	Append(id int64, data []byte)
	Close()
}
