package turn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"go.opentelemetry.io/otel/trace"

	"svc/agent"
	"svc/runner/approvals"
	"svc/runner/models"
	"svc/runner/sessions"
	"svc/runner/sessions/live"
)

// Storage defaults: what one session's history and all of one agent's sessions may hold.
const (
	DefaultSessionStorage = 100 << 20 // bytes of history per session
	DefaultAgentStorage   = 10 << 30  // bytes of history over an agent's sessions

	// usageTTL is how long an agent's summed storage is reused before it is read again.
	usageTTL = 2 * time.Second
	// blobCacheEntries and blobCacheMax bound the attachment content an Engine keeps to replay
	// history without reading it back: at most 32 contents of at most 2 MiB each (64 MiB).
	blobCacheEntries = 32
	blobCacheMax     = 2 << 20
	// persistTimeout bounds the save of a turn's result, which outlives a client that left.
	persistTimeout = 30 * time.Second
)

// StorageLimits bound what history may hold. A zero field takes its default; a negative one
// removes the bound.
type StorageLimits struct {
	// SessionBytes bounds one session: a message that would take it past the bound is refused
	// (SessionFull).
	SessionBytes int64
	// AgentBytes bounds the sum over the agent's sessions (when the store can sum them): past it,
	// messages are refused (AgentFull) until sessions are deleted.
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

// Config is what every turn of one runtime shares. Cache, Store, Blobs, Locker, Profiles and
// Models are required.
type Config struct {
	Agent    *agent.Agent
	AgentID  string // the platform agent; "" under svc dev
	Profiles *Profiles
	Cache    *live.Cache
	Store    sessions.Store // summed for the agent's storage bound when it is a sessions.Sizer
	Blobs    sessions.Blobs
	Locker   sessions.Locker
	Storage  StorageLimits
	// Guard is svc.json's guardrails.preInput, applied to every message of Open and Queue; nil
	// checks nothing.
	Guard *agent.InputGuard
	// Models returns the provider of a model reference.
	Models func(agent.ModelRef) (models.Provider, error)
	// DefaultModel applies when a session chose no model and svc.json has no models.main.
	// Zero: the echo model, with a warning frame on the session's first turn.
	DefaultModel agent.ModelRef
	// MaxTurns bounds the model calls of a turn (0: loop's default); ContextWindow overrides
	// the model's window for compaction (0: the model's).
	MaxTurns      int
	ContextWindow int
	// Approvals records and awaits the user's approval of calls that need it; nil refuses such
	// calls. ApprovalTimeout denies an approval without an answer (0: approvals.DefaultTimeout).
	Approvals       *approvals.Hub
	ApprovalTimeout time.Duration
	// Observer, when set, is told of every turn that runs (metrics).
	Observer Observer
	// Tracer, when set, records a span per turn with its model and tool calls as children, and
	// the done frame carries its trace id; nil records nothing. DeployID is recorded on it.
	Tracer   trace.Tracer
	DeployID string
	Logger   *slog.Logger
	Now      func() time.Time
}

// Engine begins and runs turns. It is safe for concurrent use.
type Engine struct {
	cfg       Config
	blobCache *lru.Cache[string, []byte]
	usage     agentUsage
	records   bool // the store keeps runs (sessions.RunRecorder): a turn builds its run's record
}

// NewEngine returns the Engine of cfg.
func NewEngine(cfg Config) (*Engine, error) {
	switch {
	case cfg.Agent == nil, cfg.Profiles == nil, cfg.Cache == nil, cfg.Store == nil, cfg.Blobs == nil, cfg.Locker == nil, cfg.Models == nil:
		return nil, errors.New("turn: Config needs Agent, Profiles, Cache, Store, Blobs, Locker and Models")
	case cfg.MaxTurns < 0:
		return nil, fmt.Errorf("turn: MaxTurns must not be negative, got %d", cfg.MaxTurns)
	}
	cfg.Storage = cfg.Storage.withDefaults()
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c, err := lru.New[string, []byte](blobCacheEntries)
	if err != nil {
		return nil, err
	}
	_, records := cfg.Store.(sessions.RunRecorder)
	return &Engine{cfg: cfg, blobCache: c, records: records}, nil
}

// Lock is a turn's hold on its session: Release frees it; Lost, when not nil, is closed if the
// lock is lost before that (a shared lock that could not be renewed).
type Lock struct {
	Release func()
	Lost    <-chan struct{}
}

// Lock takes the turn lock of session id, watching for its loss when the Locker can. A session
// that runs a turn already is a Busy Error.
func (e *Engine) Lock(ctx context.Context, id string) (Lock, error) {
	var lk Lock
	var err error
	if w, ok := e.cfg.Locker.(sessions.Watcher); ok {
		lk.Release, lk.Lost, err = w.TryLockWatch(ctx, id)
	} else {
		lk.Release, err = e.cfg.Locker.TryLock(ctx, id)
	}
	if errors.Is(err, sessions.ErrLocked) {
		return Lock{}, errBusy()
	}
	if err != nil {
		return Lock{}, fmt.Errorf("lock session: %w", err)
	}
	return lk, nil
}

// EntrySize is what a history entry counts for against the storage bounds: its text, thinking,
// tool calls and the size of each attachment.
func EntrySize(m *models.Message) int64 {
	n := len(m.Content) + len(m.Thinking) + len(m.ThinkingSignature)
	for _, tc := range m.ToolCalls {
		n += len(tc.Name) + len(tc.Arguments)
	}
	for _, p := range m.Parts {
		n += max(p.Size, len(p.Data))
	}
	return int64(n)
}

// agentUsage caches the agent's summed storage for usageTTL.
type agentUsage struct {
	mu    sync.Mutex
	bytes int64
	at    time.Time
}

// checkAgentStorage refuses a message of n bytes when the agent's sessions hold the agent bound
// (AgentFull). Call it before the session is locked: it may read the store.
func (e *Engine) checkAgentStorage(ctx context.Context, n int64) error {
	limit := e.cfg.Storage.AgentBytes
	sz, ok := e.cfg.Store.(sessions.Sizer)
	if limit <= 0 || !ok {
		return nil
	}
	u := &e.usage
	u.mu.Lock()
	defer u.mu.Unlock()
	if now := e.cfg.Now(); now.Sub(u.at) > usageTTL {
		used, err := sz.AgentStoredBytes(ctx, e.cfg.AgentID)
		if err != nil {
			return err
		}
		u.bytes, u.at = used, now
	}
	if u.bytes+n > limit {
		return &Error{Kind: AgentFull, Message: fmt.Sprintf("the agent's sessions hold %d bytes, and this message of %d bytes would pass the limit of %d; delete sessions to make room", u.bytes, n, limit)}
	}
	u.bytes += n // until the next read, count what this runtime adds
	return nil
}

// checkSessionStorage refuses a message of n bytes that would take s past the session bound
// (SessionFull). Call it under the live session's mutex.
func (e *Engine) checkSessionStorage(s *sessions.Session, n int64) error {
	if limit := e.cfg.Storage.SessionBytes; limit > 0 && s.StoredBytes+n > limit {
		return &Error{Kind: SessionFull, Message: fmt.Sprintf("the session holds %d bytes and this message %d more, over the limit of %d bytes per session; start a new session", s.StoredBytes, n, limit)}
	}
	return nil
}

// storeParts puts the content of parts into the blob store and returns them as history keeps
// them: with a Ref and Size, without Data. The parts themselves keep their Data for this turn.
func (e *Engine) storeParts(ctx context.Context, session string, parts []models.Part) ([]models.Part, error) {
	if len(parts) == 0 {
		return nil, nil
	}
	kept := make([]models.Part, len(parts))
	for i, p := range parts {
		ref := sessions.BlobRef(p.Data)
		if err := e.cfg.Blobs.Put(ctx, session, ref, p.Data); err != nil {
			return nil, fmt.Errorf("store attachment %s: %w", p.Filename, err)
		}
		e.cacheBlob(ref, p.Data)
		kept[i] = models.Part{MimeType: p.MimeType, Filename: p.Filename, Ref: ref, Size: len(p.Data)}
	}
	return kept, nil
}

// loadParts returns history with the content of every referenced attachment read back, for the
// model; messages without references are shared as they are.
func (e *Engine) loadParts(ctx context.Context, session string, history []models.Message) ([]models.Message, error) {
	for i := range history {
		m := &history[i]
		if !needsContent(m.Parts) {
			continue
		}
		parts := make([]models.Part, len(m.Parts))
		for j, p := range m.Parts {
			if len(p.Data) == 0 && p.Ref != "" {
				data, ok := e.blobCache.Get(p.Ref)
				if !ok {
					var err error
					if data, err = e.cfg.Blobs.Get(ctx, session, p.Ref); err != nil {
						return nil, fmt.Errorf("read attachment %s of the history: %w", p.Filename, err)
					}
					e.cacheBlob(p.Ref, data)
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

// cacheBlob keeps content that is small enough for the cache.
func (e *Engine) cacheBlob(ref string, data []byte) {
	if len(data) <= blobCacheMax {
		e.blobCache.Add(ref, data)
	}
}

// ModelRef picks the session's model: the session's choice, else svc.json models.main, else
// the default model, else echo (fallback true).
func (e *Engine) ModelRef(s *sessions.Session) (ref agent.ModelRef, fallback bool) {
	main, hasMain := e.cfg.Agent.MainModel()
	if !s.Model.IsZero() {
		ref := agent.ModelRef{Provider: s.Model.Provider, Model: s.Model.Model, Effort: s.Model.Effort}
		if hasMain && main.Provider == ref.Provider { // same provider: its endpoint and key apply
			ref.BaseURL, ref.APIKey = main.BaseURL, main.APIKey
		}
		return ref, false
	}
	if hasMain {
		return main, false
	}
	if e.cfg.DefaultModel.Provider != "" {
		return e.cfg.DefaultModel, false
	}
	return agent.ModelRef{Provider: models.ProviderEcho, Model: "echo"}, true
}
