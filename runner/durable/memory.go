package durable

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"
)

// Memory is a Store in this process's memory, for svc dev and tests. The zero value is ready to
// use. It copies runs and entries in and out, so that no caller shares its state.
type Memory struct {
	mu      sync.Mutex
	runs    map[string]Run
	journal map[string][]Entry
	keys    map[string]map[string]bool // the journal's keys by run, so that Record need not scan it
}

var _ Store = (*Memory)(nil)

// defaultLimit is List's page when the filter names none, and its largest.
const defaultLimit = 500

// Create implements Store.
func (s *Memory) Create(_ context.Context, r Run) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runs == nil {
		s.runs = make(map[string]Run)
		s.journal = make(map[string][]Entry)
		s.keys = make(map[string]map[string]bool)
	}
	if _, ok := s.runs[r.ID]; ok {
		return fmt.Errorf("durable: create %s: a run of that id exists", r.ID)
	}
	s.runs[r.ID] = cloneRun(r)
	return nil
}

// Get implements Store.
func (s *Memory) Get(_ context.Context, agentID, id string) (Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok || r.AgentID != agentID {
		return Run{}, notFound(id)
	}
	return cloneRun(r), nil
}

// List implements Store.
func (s *Memory) List(_ context.Context, f Filter) ([]Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Run
	for _, r := range s.runs {
		if r.AgentID != f.AgentID || (len(f.Statuses) > 0 && !slices.Contains(f.Statuses, r.Status)) {
			continue
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].ID > out[j].ID
	})
	if n := limit(f.Limit); len(out) > n {
		out = out[:n]
	}
	for i := range out {
		out[i] = cloneRun(out[i])
	}
	return out, nil
}

// Journal implements Store. A run without entries, or without a record at all, has an empty
// journal.
func (s *Memory) Journal(_ context.Context, id string) ([]Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	entries := s.journal[id]
	out := make([]Entry, len(entries))
	for i, e := range entries {
		out[i] = cloneEntry(e)
	}
	return out, nil
}

// Record implements Store.
func (s *Memory) Record(_ context.Context, id string, attempt int, e Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok || r.Status != Running || r.Attempt != attempt {
		return stale(id)
	}
	return s.appendLocked(id, e)
}

// RecordAll implements Store.
func (s *Memory) RecordAll(_ context.Context, id string, attempt int, es []Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok || r.Status != Running || r.Attempt != attempt {
		return stale(id)
	}
	seen := map[string]bool{}
	for _, e := range es {
		if s.keys[id][e.Key] || seen[e.Key] {
			return recorded(id, e.Key)
		}
		seen[e.Key] = true
	}
	for _, e := range es {
		if err := s.appendLocked(id, e); err != nil {
			return err // checked above: cannot happen
		}
	}
	return nil
}

// appendLocked appends e to the journal of id, numbering it (and dating it, when undated);
// ErrRecorded when its key exists.
func (s *Memory) appendLocked(id string, e Entry) error {
	keys := s.keys[id]
	if keys[e.Key] {
		return recorded(id, e.Key)
	}
	if keys == nil {
		keys = make(map[string]bool)
		s.keys[id] = keys
	}
	keys[e.Key] = true
	entries := s.journal[id]
	e = cloneEntry(e)
	if e.At.IsZero() {
		e.At = time.Now().UTC() // as DB records it
	}
	e.Seq = len(entries) + 1
	s.journal[id] = append(entries, e)
	return nil
}

// Claim implements Store.
func (s *Memory) Claim(_ context.Context, agentID, id string, from []string, now, leaseUntil time.Time) (Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok || r.AgentID != agentID {
		return Run{}, notFound(id)
	}
	if !slices.Contains(from, r.Status) && (r.Status != Running || !r.LeaseUntil.Before(now)) {
		return cloneRun(r), stale(id)
	}
	if r.Status == Running {
		r.Executions++
	} else {
		r.Executions = 1
	}
	r.Status, r.Attempt, r.LeaseUntil, r.UpdatedAt = Running, r.Attempt+1, leaseUntil.UTC(), now.UTC()
	s.runs[id] = r
	return cloneRun(r), nil
}

// Answer implements Store.
func (s *Memory) Answer(_ context.Context, agentID, id, key string, value json.RawMessage, by string, now, leaseUntil time.Time) (Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok || r.AgentID != agentID {
		return Run{}, notFound(id)
	}
	if !Parked(r.Status) || r.Pause == nil || r.Pause.Key != key {
		return cloneRun(r), stale(id)
	}
	if err := s.appendLocked(id, Entry{Key: key, Value: value, At: now.UTC()}); err != nil {
		return cloneRun(r), err
	}
	r.Status, r.Attempt, r.Executions, r.LeaseUntil, r.UpdatedAt, r.AnsweredBy = Running, r.Attempt+1, 1, leaseUntil.UTC(), now.UTC(), by
	s.runs[id] = r
	return cloneRun(r), nil
}

// Settle implements Store.
func (s *Memory) Settle(_ context.Context, in Run) (Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[in.ID]
	if !ok || r.AgentID != in.AgentID {
		return Run{}, notFound(in.ID)
	}
	if r.Status != Running || r.Attempt != in.Attempt {
		return cloneRun(r), stale(in.ID)
	}
	in = cloneRun(in)
	r.Status, r.Pause, r.Result, r.Error, r.UpdatedAt = in.Status, in.Pause, in.Result, in.Error, settledAt(in)
	s.runs[in.ID] = r
	return cloneRun(r), nil
}

// Cancel implements Store.
func (s *Memory) Cancel(_ context.Context, agentID, id string, now time.Time) (Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok || r.AgentID != agentID {
		return Run{}, notFound(id)
	}
	if Ended(r.Status) {
		return cloneRun(r), stale(id)
	}
	r.Status, r.UpdatedAt = Cancelled, now.UTC()
	s.runs[id] = r
	return cloneRun(r), nil
}

// settledAt is the UpdatedAt a Settle writes: the run's own when the caller set it, else now.
func settledAt(r Run) time.Time {
	if r.UpdatedAt.IsZero() {
		return time.Now().UTC()
	}
	return r.UpdatedAt.UTC()
}

// limit is the number of runs List returns for a filter's limit.
func limit(n int) int {
	if n <= 0 || n > defaultLimit {
		return defaultLimit
	}
	return n
}

func notFound(id string) error { return fmt.Errorf("%w: %s", ErrNotFound, id) }

func stale(id string) error { return fmt.Errorf("%w: %s", ErrStale, id) }

func recorded(id, key string) error { return fmt.Errorf("%w: %s under %q", ErrRecorded, id, key) }

// cloneRun returns a copy of r that shares no memory with it, its times in UTC.
func cloneRun(r Run) Run {
	r.Input = cloneRaw(r.Input)
	r.Result = cloneRaw(r.Result)
	if r.Context != nil {
		r.Context = maps.Clone(r.Context)
	}
	r.Pause = clonePause(r.Pause)
	r.LeaseUntil, r.CreatedAt, r.UpdatedAt = utc(r.LeaseUntil), utc(r.CreatedAt), utc(r.UpdatedAt)
	return r
}

// clonePause returns a copy of p that shares no memory with it.
func clonePause(p *Pause) *Pause {
	if p == nil {
		return nil
	}
	c := *p
	c.Options, c.Payload, c.OnTimeout = cloneRaw(p.Options), cloneRaw(p.Payload), cloneRaw(p.OnTimeout)
	c.EligibleAnswerers = slices.Clone(p.EligibleAnswerers)
	c.ExcludeAnswerers = slices.Clone(p.ExcludeAnswerers)
	c.WakeAt, c.ExpiresAt = cloneTime(p.WakeAt), cloneTime(p.ExpiresAt)
	return &c
}

func cloneEntry(e Entry) Entry {
	e.Value = cloneRaw(e.Value)
	e.At = utc(e.At)
	return e
}

// cloneRaw copies b; an empty message becomes nil, as the database stores it.
func cloneRaw(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return slices.Clone(b)
}

func cloneTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	c := t.UTC()
	return &c
}

// utc is t in UTC, the zero time left as it is.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}
