package runtime

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/semaphore"

	"svc/runner/models"
	"svc/runner/sessions"
)

// Storage defaults: what one session's history and all of one agent's sessions may hold, and the
// memory that large request bodies in flight may take.
const (
	DefaultSessionStorage = 100 << 20 // bytes of history per session
	DefaultAgentStorage   = 10 << 30  // bytes of history over an agent's sessions
	DefaultBodyMemory     = 512 << 20 // bytes of memory for large bodies in flight, per process

	// bodyWeight is the memory a request body is counted for, per byte of body: the raw body,
	// its decoded strings and attachments, the history rows and the answer. Measured with
	// scripts/largechats.sh, one 49 MiB chat takes about 13 times its size when the echo model
	// repeats its text, about 4.5 times when it is attachments.
	bodyWeight = 12
	// smallBody is the size under which a body is not counted at all.
	smallBody = 1 << 20
	// DefaultBodyWait is how long a large body waits for memory before the request is refused.
	DefaultBodyWait = 30 * time.Second
	// usageTTL is how long an agent's summed storage is reused before it is read again.
	usageTTL = 2 * time.Second
	// blobCacheEntries and blobCacheMax bound the attachment content a runtime keeps to replay
	// history without reading it back: at most 32 contents of at most 2 MiB each (64 MiB).
	blobCacheEntries = 32
	blobCacheMax     = 2 << 20
)

// StorageLimits bound what history may hold. A zero field takes its default; a negative one
// removes the bound.
type StorageLimits struct {
	// SessionBytes bounds one session: a message that would take it past the bound is refused
	// with 413 session_storage_full.
	SessionBytes int64
	// AgentBytes bounds the sum over the agent's sessions (when the store can sum them): past it,
	// 429 agent_storage_full until sessions are deleted.
	AgentBytes int64
}

func (l StorageLimits) withDefaults() StorageLimits {
	if l.SessionBytes == 0 {
		l.SessionBytes = DefaultSessionStorage
	}
	if l.AgentBytes == 0 {
		l.AgentBytes = DefaultAgentStorage
	}
	return l
}

// BodyBudget bounds the memory that large request bodies take while their requests run: a body
// over 1 MiB is counted at twelve times its size (its Content-Length, or the 50 MB limit when it
// has none) from before it is read until its request ends, and waits up to 30 s for room, then
// gets 503 server_busy. One budget is shared by every runtime of a process. It is safe for
// concurrent use.
type BodyBudget struct {
	sem  *semaphore.Weighted
	size int64
	wait time.Duration
}

// NewBodyBudget returns a budget of maxBytes (DefaultBodyMemory when 0 or less) where a body
// waits at most wait for room (DefaultBodyWait when 0 or less).
func NewBodyBudget(maxBytes int64, wait time.Duration) *BodyBudget {
	if maxBytes <= 0 {
		maxBytes = DefaultBodyMemory
	}
	if wait <= 0 {
		wait = DefaultBodyWait
	}
	return &BodyBudget{sem: semaphore.NewWeighted(maxBytes), size: maxBytes, wait: wait}
}

// admit takes room for r's body, or returns why not; release gives it back.
func (b *BodyBudget) admit(r *http.Request) (release func(), err error) {
	n := r.ContentLength
	if n < 0 || n > MaxBodyBytes {
		n = MaxBodyBytes
	}
	if r.Method == http.MethodGet || n < smallBody {
		return func() {}, nil
	}
	w := min(n*bodyWeight, b.size)
	ctx, cancel := context.WithTimeout(r.Context(), b.wait)
	defer cancel()
	if err := b.sem.Acquire(ctx, w); err != nil {
		return nil, &APIError{Code: CodeBusy, Message: fmt.Sprintf("the runtime is handling other large requests (a %d-byte body waits for memory); retry in a few seconds", r.ContentLength)}
	}
	return func() { b.sem.Release(w) }, nil
}

// entrySize is what a history entry counts for against the storage bounds: its text, thinking,
// tool calls and the size of each attachment.
func entrySize(m *models.Message) int64 {
	n := len(m.Content) + len(m.Thinking) + len(m.ThinkingSignature)
	for _, tc := range m.ToolCalls {
		n += len(tc.Name) + len(tc.Arguments)
	}
	for _, p := range m.Parts {
		n += max(p.Size, len(p.Data))
	}
	return int64(n)
}

// storeParts puts the content of parts into the blob store and returns them as history keeps
// them: with a Ref and Size, without Data. The parts themselves keep their Data for this turn.
func (rt *Runtime) storeParts(ctx context.Context, session string, parts []models.Part) ([]models.Part, error) {
	if len(parts) == 0 {
		return nil, nil
	}
	kept := make([]models.Part, len(parts))
	for i, p := range parts {
		ref := sessions.BlobRef(p.Data)
		if err := rt.blobs.Put(ctx, session, ref, p.Data); err != nil {
			return nil, fmt.Errorf("store attachment %s: %w", p.Filename, err)
		}
		rt.cacheBlob(ref, p.Data)
		kept[i] = models.Part{MimeType: p.MimeType, Filename: p.Filename, Ref: ref, Size: len(p.Data)}
	}
	return kept, nil
}

// loadParts returns history with the content of every referenced attachment read back, for the
// model; messages without references are shared as they are.
func (rt *Runtime) loadParts(ctx context.Context, session string, history []models.Message) ([]models.Message, error) {
	for i := range history {
		m := &history[i]
		if !needsContent(m.Parts) {
			continue
		}
		parts := make([]models.Part, len(m.Parts))
		for j, p := range m.Parts {
			if len(p.Data) == 0 && p.Ref != "" {
				data, ok := rt.blobCache.Get(p.Ref)
				if !ok {
					var err error
					if data, err = rt.blobs.Get(ctx, session, p.Ref); err != nil {
						return nil, fmt.Errorf("read attachment %s of the history: %w", p.Filename, err)
					}
					rt.cacheBlob(p.Ref, data)
				}
				p.Data = data
			}
			parts[j] = p
		}
		m.Parts = parts // history is the turn's own slice; the session's entries are untouched
	}
	return history, nil
}

func needsContent(parts []models.Part) bool {
	for _, p := range parts {
		if len(p.Data) == 0 && p.Ref != "" {
			return true
		}
	}
	return false
}

// checkSessionStorage refuses a message of n bytes that would take s past the session bound.
func (rt *Runtime) checkSessionStorage(s *sessions.Session, n int64) error {
	if limit := rt.storage.SessionBytes; limit > 0 && s.StoredBytes+n > limit {
		return &APIError{Code: CodeSessionFull, Message: fmt.Sprintf("the session holds %d bytes and this message %d more, over the limit of %d bytes per session; start a new session", s.StoredBytes, n, limit)}
	}
	return nil
}

// agentUsage caches the agent's summed storage for usageTTL.
type agentUsage struct {
	mu    sync.Mutex
	bytes int64
	at    time.Time
}

// checkAgentStorage refuses a message of n bytes when the agent's sessions hold the agent bound.
func (rt *Runtime) checkAgentStorage(ctx context.Context, n int64) error {
	limit := rt.storage.AgentBytes
	sz, ok := rt.store.(sessions.Sizer)
	if limit <= 0 || !ok {
		return nil
	}
	u := &rt.usage
	u.mu.Lock()
	defer u.mu.Unlock()
	if now := rt.now(); now.Sub(u.at) > usageTTL {
		used, err := sz.AgentStoredBytes(ctx, rt.opts.AgentID)
		if err != nil {
			return err
		}
		u.bytes, u.at = used, now
	}
	if u.bytes+n > limit {
		return &APIError{Code: CodeAgentFull, Message: fmt.Sprintf("the agent's sessions hold %d bytes, and this message of %d bytes would pass the limit of %d; delete sessions to make room", u.bytes, n, limit)}
	}
	u.bytes += n // until the next read, count what this runtime adds
	return nil
}

// cacheBlob keeps content that is small enough for the cache.
func (rt *Runtime) cacheBlob(ref string, data []byte) {
	if len(data) <= blobCacheMax {
		rt.blobCache.Add(ref, data)
	}
}

// newBlobCache is the attachment content kept to replay history without reading it back.
func newBlobCache() *lru.Cache[string, []byte] {
	c, err := lru.New[string, []byte](blobCacheEntries)
	if err != nil {
		panic(err) // a positive size never fails
	}
	return c
}
