package access

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"
)

// DefaultSessionCacheTTL is how long a SessionCache trusts a session it read without reading it
// again. A logout on another runner reaches this one within this time plus the store's own
// delay (none for the database), which keeps CONTRACT §8's "ended on every runner within 5 s"
// with room to spare, while a browser making a request a second costs the store one read every
// two seconds instead of one a request.
const DefaultSessionCacheTTL = 2 * time.Second

// SessionCacheParams configure NewSessionCache; the zero value holds the documented defaults.
type SessionCacheParams struct {
	// TTL is how long a session read from the store is trusted; default DefaultSessionCacheTTL.
	// Keep it well under 5 s: it bounds how late a logout on another runner is seen here.
	TTL time.Duration
	// Size is how many sessions are remembered; default 10,000.
	Size int
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// SessionCache checks browser-session cookies against a Sessions without reading it on every
// request: a session read from the store is trusted for TTL, then read again. A session ended
// through this cache is refused by it at once, and for good; other runners see the end within
// TTL. Sessions found ended or expired stay refused without another read. Concurrent misses of
// one session share one read. Safe for concurrent use.
type SessionCache struct {
	store  Sessions
	ttl    time.Duration
	now    func() time.Time
	mu     sync.Mutex // orders an insert after a read against an End
	cache  *lru.Cache[string, cacheEntry]
	flight singleflight.Group
}

// cacheEntry is what the cache knows of one session id.
type cacheEntry struct {
	session   BrowserSession
	found     bool      // the store holds it
	ended     bool      // ended through this cache: refused whatever a late read says
	fetchedAt time.Time // when it was read from the store
}

// final reports whether e can never become valid again, so it needs no new read.
func (e cacheEntry) final(now time.Time) bool {
	return e.ended || (e.found && (!e.session.EndedAt.IsZero() || !now.Before(e.session.ExpiresAt)))
}

// NewSessionCache returns a cache in front of store.
func NewSessionCache(store Sessions, p SessionCacheParams) *SessionCache {
	c := &SessionCache{store: store, ttl: p.TTL, now: p.Now}
	if c.ttl <= 0 {
		c.ttl = DefaultSessionCacheTTL
	}
	if c.now == nil {
		c.now = time.Now
	}
	size := p.Size
	if size <= 0 {
		size = 10_000
	}
	cache, err := lru.New[string, cacheEntry](size)
	if err != nil {
		panic(err) // only for a size <= 0, excluded above
	}
	c.cache = cache
	return c
}

// Create starts a browser session of agentID for the signed-in user id (from SignIn.Callback)
// and returns the cookie value to set (see SessionCookie) with the stored record.
func (c *SessionCache) Create(ctx context.Context, agentID string, id Identity) (string, BrowserSession, error) {
	cookie, sid := NewSessionCookie()
	now := c.now()
	s := BrowserSession{
		ID: sid, AgentID: agentID, UserID: id.UserID, Email: id.Email, EmailOK: id.EmailVerified,
		OrgID: id.OrgID, Groups: id.Groups, Scope: id.Scope,
		CreatedAt: now, ExpiresAt: now.Add(SessionTTL),
	}
	if err := c.store.Create(ctx, s); err != nil {
		return "", BrowserSession{}, fmt.Errorf("create browser session: %w", err)
	}
	c.put(sid, cacheEntry{session: s, found: true, fetchedAt: now})
	return cookie, s, nil
}

// Identity returns the Identity of a request to agentID carrying the session cookie value
// cookie. A cookie naming no usable session (unknown, ended, expired, another agent's, or "")
// is an error matching ErrNoSession and ErrUnauthenticated (401); any other error is the
// store's.
func (c *SessionCache) Identity(ctx context.Context, agentID, cookie string) (Identity, error) {
	if cookie == "" {
		return Identity{}, &noSessionError{reason: "no cookie"}
	}
	sid := SessionID(cookie)
	now := c.now()
	e, ok := c.cache.Get(sid)
	if !ok || (!e.final(now) && now.Sub(e.fetchedAt) >= c.ttl) {
		var err error
		if e, err = c.read(ctx, sid); err != nil {
			return Identity{}, err
		}
	}
	switch {
	case e.ended:
		return Identity{}, &noSessionError{reason: "it was ended (signed out)"}
	case !e.found:
		return Identity{}, &noSessionError{reason: "unknown"}
	}
	if err := e.session.check(agentID, now); err != nil {
		return Identity{}, err
	}
	return e.session.Identity(), nil
}

// read fetches sid from the store (one read for concurrent callers) and caches the outcome.
func (c *SessionCache) read(ctx context.Context, sid string) (cacheEntry, error) {
	v, err, _ := c.flight.Do(sid, func() (any, error) {
		// Other callers wait on this read too: it does not end with the first caller's request.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		s, err := c.store.Get(rctx, sid)
		e := cacheEntry{session: s, found: err == nil, fetchedAt: c.now()}
		if err != nil && !errors.Is(err, ErrSessionNotFound) {
			return nil, fmt.Errorf("read browser session: %w", err)
		}
		return c.put(sid, e), nil
	})
	if err != nil {
		return cacheEntry{}, err
	}
	return v.(cacheEntry), nil
}

// put caches e for sid unless sid was ended here meanwhile, and returns what is cached.
func (c *SessionCache) put(sid string, e cacheEntry) cacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.cache.Peek(sid); ok && old.ended {
		return old
	}
	c.cache.Add(sid, e)
	return e
}

// End ends the session of cookie (logout): this cache refuses it at once, the store records the
// end for every other runner. Ending an unknown or ended session is no error.
func (c *SessionCache) End(ctx context.Context, cookie string) error {
	if cookie == "" {
		return nil
	}
	sid := SessionID(cookie)
	now := c.now()
	c.mu.Lock()
	c.cache.Add(sid, cacheEntry{ended: true, fetchedAt: now})
	c.mu.Unlock()
	if err := c.store.End(ctx, sid, now); err != nil && !errors.Is(err, ErrSessionNotFound) {
		return fmt.Errorf("end browser session: %w", err)
	}
	return nil
}
