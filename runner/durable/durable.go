// Package durable keeps durable tool runs (spec 2.8, 3.2, 4.7; CONTRACT §6): a run is its own
// session, with a status, the pause it waits at, and a journal of what its handler did.
//
// A handler of a durable tool re-runs from the top every time its run resumes. Every call the
// handler journals (ctx.step, child tools and subagents, ctx.now, ctx.random, and the answers to
// its pauses) is an Entry under a key made of its kind, its name and its occurrence: on replay the
// call returns the recorded value instead of running again. The first pause without an answer
// parks the run (awaiting-input or sleeping): the run then lives in the Store only, and holds no
// goroutine and no memory until it is answered, woken or cancelled.
//
// Whoever executes a run first claims it (Claim or Answer): the claim raises the run's Attempt and
// sets its lease. Journal writes and the end of the execution (Settle) name the attempt, and fail
// with ErrStale once another executor claimed the run, so that a run is never advanced by two
// executors at once. A run left running past its lease (its executor died) may be claimed again.
package durable

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Statuses of a run (CONTRACT §6).
const (
	Running       = "running"
	AwaitingInput = "awaiting-input"
	Sleeping      = "sleeping"
	Completed     = "completed"
	Failed        = "failed"
	Cancelled     = "cancelled"
)

// Kinds of a pause.
const (
	PauseInput    = "input"    // ctx.requestInput
	PauseApproval = "approval" // ctx.waitForApproval
	PauseSleep    = "sleep"    // ctx.sleepUntil
)

// Errors of a Store.
var (
	// ErrNotFound: no run of that id (for that agent).
	ErrNotFound = errors.New("durable: no such run")
	// ErrStale: the run moved on (another executor claimed it, or it is no longer in the state the
	// caller expected). Nothing was written.
	ErrStale = errors.New("durable: the run moved on")
	// ErrRecorded: the journal already holds an entry under that key. Nothing was written.
	ErrRecorded = errors.New("durable: journal entry exists")
)

// Parked reports whether a status is a pause a run waits at for something outside it.
func Parked(status string) bool { return status == AwaitingInput || status == Sleeping }

// Ended reports whether a status is final.
func Ended(status string) bool { return status == Completed || status == Failed || status == Cancelled }

// Run is one durable tool run.
type Run struct {
	ID       string
	AgentID  string // "" under svc dev
	DeployID string // the deployment whose bundle the run resumes on
	ToolName string
	// ParentSessionID is the chat session that started the run ("" for a restart without one).
	ParentSessionID string
	// Owner and ScopeID are the parent session's, for the tenancy rules of spec 4.6.
	Owner   string
	ScopeID string
	Status  string
	Input   json.RawMessage   // the tool's arguments
	Context map[string]string // the chat's context map (spec 2.5), for the children's templates
	// Model is the model the starting chat session chose (zero when none): the specialists the
	// handler asks run on it on every resume, as in an inline tool.
	Model Model
	// Pause is where the run waits; nil unless the run is parked (or was, when it ended by a
	// cancel or a timeout).
	Pause      *Pause
	AnsweredBy string          // who answered the latest pause
	Result     json.RawMessage // the handler's result, once completed
	Error      string          // why the run failed, once failed
	// Attempt counts the claims of the run: each execution has its own, and it fences the
	// others off (their journal writes and Settle fail with ErrStale).
	Attempt int
	// Executions counts the executions begun since the run last waited at a pause (or was
	// created): 1 for the first, one more for each claim of a lapsed lease (an execution that
	// stored no outcome in time). An answer or a claim from a pause starts it at 1 again.
	Executions int
	// LeaseUntil is when a running run's executor counts as dead.
	LeaseUntil time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Model names a chat session's model choice (spec 2.5 model); never an API key or address.
type Model struct {
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	Effort   string `json:"effort,omitempty"`
}

// Pause is what a parked run waits for.
type Pause struct {
	Kind string `json:"kind"` // PauseInput, PauseApproval or PauseSleep
	// Key is the journal key its answer (or wake-up) is recorded under.
	Key               string          `json:"key"`
	Question          string          `json:"question,omitempty"`
	Context           string          `json:"context,omitempty"`
	InputType         string          `json:"input_type,omitempty"` // text, choice or yesno
	Options           json.RawMessage `json:"options,omitempty"`    // [{value, label, recommended?, sub?}]
	Payload           json.RawMessage `json:"payload,omitempty"`
	AllowEdits        bool            `json:"allow_edits,omitempty"`
	EligibleAnswerers []string        `json:"eligible_answerers,omitempty"`
	ExcludeAnswerers  []string        `json:"exclude_answerers,omitempty"`
	// WakeAt is when a sleep ends.
	WakeAt *time.Time `json:"wake_at,omitempty"`
	// ExpiresAt is when an unanswered input or approval times out, and OnTimeout what happens
	// then: {"action": "deny"}, {"action": "default", "value": ...} or {"action": "escalate",
	// "to": [...]}.
	ExpiresAt *time.Time      `json:"expires_at,omitempty"`
	OnTimeout json.RawMessage `json:"on_timeout,omitempty"`
}

// Entry is one journaled call of a run.
type Entry struct {
	Key   string          // kind:name#occurrence, e.g. "step:stamp#1", "now#2", "input#1"
	Seq   int             // order of recording within the run, from 1 (set by the Store)
	Value json.RawMessage // the recorded JSON result
	At    time.Time
}

// Filter selects runs for List.
type Filter struct {
	AgentID  string   // required match ("" matches runs of svc dev)
	Statuses []string // any of these; empty: every status
	Limit    int      // at most this many, newest first; 0: 500
}

// Store keeps runs and their journals. Implementations are safe for concurrent use, also across
// processes sharing the database.
type Store interface {
	// Create stores a new run (Status, Attempt and LeaseUntil as given).
	Create(ctx context.Context, r Run) error
	// Get returns the run of id; ErrNotFound when there is none for agentID.
	Get(ctx context.Context, agentID, id string) (Run, error)
	// List returns runs of the filter, newest first.
	List(ctx context.Context, f Filter) ([]Run, error)
	// Journal returns the entries of run id in the order they were recorded.
	Journal(ctx context.Context, id string) ([]Entry, error)
	// Record appends e to the journal of run id, provided the run is running under attempt.
	// ErrRecorded when the key exists; ErrStale when the run is not running under attempt.
	Record(ctx context.Context, id string, attempt int, e Entry) error
	// RecordAll appends es, in order, as Record does each, all or none: one commit for many
	// entries (an execution's steps between two child calls).
	RecordAll(ctx context.Context, id string, attempt int, es []Entry) error
	// Claim makes the run running under a new attempt with the lease, provided its status is one
	// of from, or it is running with a lease that ended before now; Executions goes up by one
	// for a run that was running, to 1 otherwise. It returns the claimed run; ErrStale (with the
	// run as it stands) otherwise.
	Claim(ctx context.Context, agentID, id string, from []string, now, leaseUntil time.Time) (Run, error)
	// Answer records the answer to the pause of key (an entry under key with value) and claims
	// the run as Claim does (Executions 1), in one transaction, provided the run is parked at
	// that pause. by is recorded as AnsweredBy. ErrStale, with the run as it stands, when it is not parked there.
	Answer(ctx context.Context, agentID, id, key string, value json.RawMessage, by string, now, leaseUntil time.Time) (Run, error)
	// Settle ends an execution: it sets the run's Status, Pause, Result and Error as given in r,
	// provided the run is running under r.Attempt. ErrStale otherwise.
	Settle(ctx context.Context, r Run) (Run, error)
	// Cancel cancels the run unless it has ended. ErrStale, with the run, when it has.
	Cancel(ctx context.Context, agentID, id string, now time.Time) (Run, error)
}
