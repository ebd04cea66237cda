package stores

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Errors callers branch on.
var (
	// ErrNotFound is returned by Get for a key that has no current record.
	ErrNotFound = errors.New("stores: record not found")
	// ErrUnknownStore is wrapped by errors about a store the agent does not define.
	ErrUnknownStore = errors.New("stores: unknown store")
	// ErrInvalid is wrapped by every error about input a caller can correct: a field of a
	// record, a key, a filter or a limit. Each such error is a *FieldError naming the field
	// (several are joined with errors.Join).
	ErrInvalid = errors.New("stores: invalid input")
	// ErrConfig is wrapped by errors about the svc.json "stores" entry: of Open, and of the uses
	// of a database whose url is not set or names the wrong kind of database.
	ErrConfig = errors.New("stores: bad stores configuration")
	// ErrUnavailable is wrapped by the error of each use of a database of the agent's own that
	// could not be opened (its url not set, of the wrong kind, or the database unreachable):
	// the store tools answer it as an error result and the store routes as 503, while the rest
	// of the runtime works. The next use tries again.
	ErrUnavailable = errors.New("stores: the stores database is unavailable")
)

// Bounds of the input Records accepts.
const (
	// DefaultLimit is the number of records a query returns when it names no limit.
	DefaultLimit = 50
	// MaxLimit is the largest limit of a query.
	MaxLimit = 500
	// MaxKeyBytes bounds a record's key.
	MaxKeyBytes = 512
	// MaxValueBytes bounds a record's value, as stored (compact JSON).
	MaxValueBytes = 256 << 10
)

// Record is one version of one record of a store.
type Record struct {
	Key     string
	Version int64 // 1 for the first write of a key, one more for each later write
	// Value is the record's fields as a compact JSON object. It is the caller's copy.
	Value     json.RawMessage
	UpdatedAt time.Time // when this version was written (UTC, microseconds)
	// Trace says who wrote this version; nil when the store does not trace writes or the
	// write came with no session and no tool call (such as the runtime's store routes).
	Trace *Trace
}

// Trace identifies the model call that wrote a version, on stores with "trace": true. The
// time of the write is the version's UpdatedAt.
type Trace struct {
	SessionID  string
	ToolCallID string
}

// Write is what a backend records with a new version besides its value.
type Write struct {
	At    time.Time // the version's UpdatedAt
	Keep  int       // earlier versions to keep for the key (the store's history.versions), 0 or more
	Trace Trace     // recorded as given; zero when the store does not trace writes
}

// Match is the query a backend runs: checked filters and a limit in 1..MaxLimit.
type Match struct {
	// Filters keep the records whose value has each Field equal to Value. Value is a string
	// (string and enum fields), a bool, an int64 (integer fields) or a float64 (number
	// fields); numbers compare by value (2 equals 2.0).
	Filters []Filter
	Limit   int
}

// Filter is one equality condition on a top-level field of a record's value.
type Filter struct {
	Field string
	Value any
}

// Backend keeps the records of one agent's stores: every method names the store, and a
// backend never mixes the records of two stores or (for a shared database) of two agents.
//
// A backend trusts its input: Records checks store names, keys, values, filters and limits
// first. Methods are safe for concurrent use and return promptly once ctx is done (with an
// error). Values handed in and out are copies: neither side keeps the other's slices.
type Backend interface {
	// Get returns the current version of key, or ErrNotFound.
	Get(ctx context.Context, store, key string) (Record, error)
	// Set writes value as the next version of key (version 1 when the key has no record) and
	// keeps at most w.Keep earlier versions, pruning older ones. Concurrent sets of one key are
	// serialised: each gets its own version and none is lost. It returns the new version.
	Set(ctx context.Context, store, key string, value json.RawMessage, w Write) (Record, error)
	// Query returns the current records that pass m's filters, newest first (by UpdatedAt,
	// then by key), at most m.Limit of them. No match is an empty slice and no error.
	Query(ctx context.Context, store string, m Match) ([]Record, error)
	// Delete removes key's record and its earlier versions; a later Set starts again at
	// version 1. deleted is false when the key had no record.
	Delete(ctx context.Context, store, key string) (deleted bool, err error)
	// History returns key's current version and at most keep earlier ones, newest first; an
	// empty slice when the key has no record.
	History(ctx context.Context, store, key string, keep int) ([]Record, error)
	// Close releases what the backend owns (the connections of a database it opened itself).
	// A platform database handed to NewSQL stays open.
	Close() error
}
