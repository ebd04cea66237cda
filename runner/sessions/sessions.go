package sessions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"time"

	"svc/runner/models"
)

// Errors callers branch on.
var (
	// ErrNotFound is returned for a session that does not exist (or was deleted).
	ErrNotFound = errors.New("sessions: session not found")
	// ErrLocked is returned by Locker.TryLock when another turn holds the session.
	ErrLocked = errors.New("sessions: session is locked")
)

// Session statuses.
const (
	StatusIdle    = "idle"
	StatusRunning = "running"
)

// Session is one chat conversation. The Store owns its copy: values returned by a Store may be
// changed freely by the caller, except the entries of Messages, which are shared and must be
// treated as read-only (the history is append-only).
type Session struct {
	ID      string
	AgentID string // platform agent the session belongs to; "" under svc dev
	Owner   string // verified user id of the creator; "" when shared
	ScopeID string
	Agent   string // named agent under agents/; "" for the unscoped default chat
	Skill   string // skill of a skill-scoped session
	// DeployID is the deployment that served the session's first turn (a hint only).
	DeployID string
	// Model is the model the request chose for the session; zero means the agent's default.
	Model Model
	// MaxSessionTokens is the cumulative token budget; 0 means none.
	MaxSessionTokens int
	Usage            Usage
	// StoredBytes is what the history holds: message text, tool calls and results, and the size
	// of each attachment it references. The runtime bounds it per session and, summed over an
	// agent's sessions (Sizer), per agent.
	StoredBytes int64
	Title       string
	Status      string
	// Metadata holds the latest value of each metadata key (spec §2.6). It never reaches the
	// model, tools or templates.
	Metadata map[string]string
	// Context holds the app facts for prompt templates of the latest request that sent some.
	Context   map[string]string
	State     State
	CreatedAt time.Time
	UpdatedAt time.Time
	// Messages is the whole history, oldest first; an entry's index is its sequence number.
	// Store.List leaves it nil.
	Messages []Entry
}

// Model is a model chosen by a chat request: {provider, model, effort?}.
type Model struct {
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	Effort   string `json:"effort,omitempty"`
}

// IsZero reports whether no model was chosen.
func (m Model) IsZero() bool { return m == Model{} }

// Usage counts the tokens a session spent.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	CachedTokens int `json:"cached_tokens"`
}

// Total is what the budget counts: input plus output tokens.
func (u Usage) Total() int { return u.InputTokens + u.OutputTokens }

// State is what the runtime keeps about a session besides its history.
type State struct {
	// Run is the run (turn) that runs on the session, as it began; nil between turns. A turn
	// that its process leaves running is recorded from it (Interrupt).
	Run *Run `json:"run,omitempty"`
	// ActiveSkills are the skills loaded so far (by load_skill or a skill-scoped start), in order.
	ActiveSkills []string `json:"active_skills,omitempty"`
	// LoadedKnowledge are the knowledge documents read so far, in order.
	LoadedKnowledge []string `json:"loaded_knowledge,omitempty"`
	// Summary replaces Messages[:SummaryUpTo] in what the model sees (compaction, spec §8).
	Summary     string `json:"summary,omitempty"`
	SummaryUpTo int    `json:"summary_up_to,omitempty"`
	// Partial is the text the running turn has streamed so far, stored from time to time while
	// it streams, so that a turn cut short by the death of its process keeps what it said (see
	// Interrupt). Empty between turns.
	Partial string `json:"partial,omitempty"`
}

// Interrupt ends a turn that its process left running (it died, or lost the turn lock): when
// the history ends with the turn's user message, the text the turn had streamed (State.Partial)
// becomes an assistant entry marked Interrupted, as for a client that disconnects. The session
// goes back to idle. It returns the record of the run it ended (reason RunInterrupted), to
// store with the session (SaveRun), or nil when s was not such a session.
func Interrupt(s *Session, now time.Time) *Run {
	if s.Status != StatusRunning {
		return nil
	}
	run := interruptedRun(s, now)
	if n := len(s.Messages); n > 0 && s.Messages[n-1].Role == models.RoleUser {
		s.Messages = append(s.Messages, Entry{Message: models.Message{Role: models.RoleAssistant, Content: s.State.Partial}, At: now, Interrupted: true})
		s.StoredBytes += int64(len(s.State.Partial))
	}
	s.State.Partial = ""
	s.State.Run = nil
	s.Status = StatusIdle
	s.UpdatedAt = now
	return run
}

// RunningLister is optionally implemented by a Store that can list the sessions whose status is
// running, of every agent (a restarted process ends those its predecessor left).
type RunningLister interface {
	Running(ctx context.Context) ([]string, error)
}

// Entry is one message of the history.
type Entry struct {
	models.Message
	At time.Time `json:"at"`
	// Interrupted marks the last message of a turn that was cancelled (client disconnect):
	// what the model produced until then, possibly nothing.
	Interrupted bool `json:"interrupted,omitempty"`
}

// Clone returns a copy of s whose maps and State slices are its own. Messages keeps the same
// entries, with its capacity clipped, so that appending to either copy never shows in the other.
func (s *Session) Clone() *Session {
	c := *s
	c.Metadata = maps.Clone(s.Metadata)
	c.Context = maps.Clone(s.Context)
	c.State.ActiveSkills = append([]string(nil), s.State.ActiveSkills...)
	c.State.LoadedKnowledge = append([]string(nil), s.State.LoadedKnowledge...)
	if s.Messages != nil {
		c.Messages = s.Messages[:len(s.Messages):len(s.Messages)]
	}
	return &c
}

// Query selects sessions for a history list.
type Query struct {
	AgentID string // required match ("" matches sessions of svc dev)
	ScopeID string // "" matches every scope
	// Metadata keeps the sessions whose metadata has each of these keys with that value (the
	// keys userId and screen of spec 2.6, say); nil matches every session.
	Metadata map[string]string
	Limit    int // at most this many, newest UpdatedAt first; 0 means DefaultListLimit
}

// DefaultListLimit is the most rows a history list fetches (spec §8).
const DefaultListLimit = 500

// Store keeps sessions and their history.
//
// Implementations are safe for concurrent use. Callers serialise writes to one session (the
// turn lock does); a Save racing another Save of the same session keeps the later record.
type Store interface {
	// Load returns the session with its whole history, or ErrNotFound.
	Load(ctx context.Context, id string) (*Session, error)
	// Save creates or replaces the session record and appends s.Messages[from:] to its history
	// (entries whose sequence number is already stored are kept as they are). from may equal
	// len(s.Messages) to save the record alone.
	Save(ctx context.Context, s *Session, from int) error
	// List returns the sessions q selects, without their messages, newest UpdatedAt first.
	List(ctx context.Context, q Query) ([]*Session, error)
	// Delete removes the session and its history; ErrNotFound when it does not exist.
	Delete(ctx context.Context, id string) error
}

// Refresher is optionally implemented by a Store that can bring a session loaded earlier up
// to date for less than Load: it reads the record and only the entries stored after those the
// caller has. A runtime over a shared store refreshes, under a turn's lock, a copy that another
// request of its own holds live.
type Refresher interface {
	// Refresh returns the stored session, its history being have.Messages (which must be a
	// prefix of the stored history, as loaded or saved by the caller) followed by the entries
	// stored after them. have is not modified. A session deleted since is ErrNotFound; one
	// deleted and created anew (another CreatedAt) is loaded whole.
	Refresh(ctx context.Context, have *Session) (*Session, error)
}

// InMemory is optionally implemented by a Store that keeps sessions in process memory: the
// runtime then does not keep its own copy of idle sessions, since loading one costs no more
// than keeping it (STYLE 8: an optional ability is its own interface).
type InMemory interface {
	InMemory() bool
}

// Sizer is optionally implemented by a Store that can sum StoredBytes over an agent's sessions.
type Sizer interface {
	// AgentStoredBytes returns the StoredBytes of every session of agentID, summed.
	AgentStoredBytes(ctx context.Context, agentID string) (int64, error)
}

// ErrBlobNotFound is returned by Blobs.Get for content that was never put.
var ErrBlobNotFound = errors.New("sessions: attachment content not found")

// Blobs keeps the content of attachments apart from history rows, once per content and session:
// history parts carry only a Ref. Content belongs to its session and goes with it (Drop), so
// what is stored stays within the sessions' storage bounds. Implementations are safe for
// concurrent use.
type Blobs interface {
	// Put stores data for session under ref, which must be BlobRef(data); storing it again
	// changes nothing.
	Put(ctx context.Context, session, ref string, data []byte) error
	// Get returns the content stored for session under ref, or ErrBlobNotFound.
	Get(ctx context.Context, session, ref string) ([]byte, error)
	// Drop removes every content stored for session; a session with none is not an error.
	Drop(ctx context.Context, session string) error
}

// BlobRef is the reference of content: "sha256:" and its hex SHA-256.
func BlobRef(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Locker grants one turn at a time per session. The in-process implementation is
// memstore.Locks; one shared by several runners (Redis) can replace it.
type Locker interface {
	// TryLock takes the lock of session id without waiting. It returns a release function, or
	// ErrLocked when the lock is held. release is safe to call more than once.
	TryLock(ctx context.Context, id string) (release func(), err error)
}

// Watcher is optionally implemented by a Locker whose locks can be lost while held: a lease that
// could not be renewed in time, so that another runner may take the session. TryLockWatch is
// TryLock, and lost is closed when the lock is lost before it is released; a turn then stops, as
// it no longer owns the session.
type Watcher interface {
	TryLockWatch(ctx context.Context, id string) (release func(), lost <-chan struct{}, err error)
}
