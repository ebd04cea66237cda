package stores

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"svc/agent"
)

// errClosed is the error of a use of a lazy backend after Close.
var errClosed = errors.New("stores: the stores backend is closed")

// lazy is the backend of a database of the agent's own (svc.json "stores.url"): it opens the
// database at the first use rather than when the runtime starts, so that a url that is not set
// yet (or a database that is down) fails the uses of the stores and nothing else. Until the
// database opens, every use tries again, resolving the reference anew: a secret set meanwhile
// applies at the next use. Once open, the database is kept until Close.
type lazy struct {
	cfg agent.StoresConfig
	p   OpenParams
	// opening holds one token: the use that opens the database takes it, so that concurrent
	// first uses open it once, and a use whose ctx ends while it waits gives up.
	opening chan struct{}

	mu     sync.Mutex
	sql    *SQL // nil until open
	closed bool
}

var _ Backend = (*lazy)(nil)

func newLazy(cfg agent.StoresConfig, p OpenParams) *lazy {
	l := &lazy{cfg: cfg, p: p, opening: make(chan struct{}, 1)}
	l.opening <- struct{}{}
	return l
}

// current returns the open database, or nil.
func (l *lazy) current() (*SQL, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errClosed
	}
	return l.sql, nil
}

// db returns the open database, opening it first when it is not: an *unavailableError when it
// does not open.
func (l *lazy) db(ctx context.Context) (*SQL, error) {
	if s, err := l.current(); s != nil || err != nil {
		return s, err
	}
	select {
	case <-l.opening:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	defer func() { l.opening <- struct{}{} }()
	if s, err := l.current(); s != nil || err != nil { // opened while this use waited
		return s, err
	}
	s, err := openOwn(ctx, l.cfg, l.p)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = s.Close() // closed while it opened: nobody will use it
		return nil, errClosed
	}
	l.sql = s
	return s, nil
}

// Get implements Backend.
func (l *lazy) Get(ctx context.Context, store, key string) (Record, error) {
	s, err := l.db(ctx)
	if err != nil {
		return Record{}, err
	}
	return s.Get(ctx, store, key)
}

// Set implements Backend.
func (l *lazy) Set(ctx context.Context, store, key string, value json.RawMessage, w Write) (Record, error) {
	s, err := l.db(ctx)
	if err != nil {
		return Record{}, err
	}
	return s.Set(ctx, store, key, value, w)
}

// Query implements Backend.
func (l *lazy) Query(ctx context.Context, store string, m Match) ([]Record, error) {
	s, err := l.db(ctx)
	if err != nil {
		return nil, err
	}
	return s.Query(ctx, store, m)
}

// Delete implements Backend.
func (l *lazy) Delete(ctx context.Context, store, key string) (bool, error) {
	s, err := l.db(ctx)
	if err != nil {
		return false, err
	}
	return s.Delete(ctx, store, key)
}

// History implements Backend.
func (l *lazy) History(ctx context.Context, store, key string, keep int) ([]Record, error) {
	s, err := l.db(ctx)
	if err != nil {
		return nil, err
	}
	return s.History(ctx, store, key, keep)
}

// Close implements Backend: it closes the database when it was opened; later uses fail.
func (l *lazy) Close() error {
	l.mu.Lock()
	s := l.sql
	l.sql, l.closed = nil, true
	l.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.Close()
}
