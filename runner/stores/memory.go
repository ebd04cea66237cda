package stores

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
)

// Memory is a Backend that keeps records in memory, for svc dev and tests: they are lost when
// the process ends. One Memory holds one agent's stores. Its zero value is not ready; use
// NewMemory.
type Memory struct {
	mu     sync.RWMutex
	stores map[string]map[string]*memEntry // store → key → entry
}

// memEntry is one key's versions, oldest first; the last is the current one. fields is the
// current value decoded, for filters.
type memEntry struct {
	versions []Record
	fields   map[string]any
}

var _ Backend = (*Memory)(nil)

// NewMemory returns an empty in-memory backend.
func NewMemory() *Memory { return &Memory{stores: map[string]map[string]*memEntry{}} }

// Get implements Backend.
func (m *Memory) Get(ctx context.Context, store, key string) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	e := m.stores[store][key]
	if e == nil {
		return Record{}, ErrNotFound
	}
	return copyRecord(e.versions[len(e.versions)-1]), nil
}

// Set implements Backend.
func (m *Memory) Set(ctx context.Context, store, key string, value json.RawMessage, w Write) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	fields, err := decodeObject(value)
	if err != nil {
		return Record{}, fmt.Errorf("set %s/%s: %w", store, key, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	keys := m.stores[store]
	if keys == nil {
		keys = map[string]*memEntry{}
		m.stores[store] = keys
	}
	e := keys[key]
	if e == nil {
		e = &memEntry{}
		keys[key] = e
	}
	rec := Record{Key: key, Version: 1, Value: bytes.Clone(value), UpdatedAt: w.At, Trace: traceOf(w.Trace)}
	if n := len(e.versions); n > 0 {
		rec.Version = e.versions[n-1].Version + 1
	}
	e.versions = append(e.versions, rec)
	if drop := len(e.versions) - (w.Keep + 1); drop > 0 {
		e.versions = slices.Delete(e.versions, 0, drop)
	}
	e.fields = fields
	return copyRecord(rec), nil
}

// Query implements Backend.
func (m *Memory) Query(ctx context.Context, store string, q Match) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	out := []Record{}
	for _, e := range m.stores[store] {
		if matches(e.fields, q.Filters) {
			out = append(out, e.versions[len(e.versions)-1])
		}
	}
	m.mu.RUnlock()
	slices.SortFunc(out, newestFirst)
	out = out[:min(len(out), q.Limit)]
	for i := range out {
		out[i] = copyRecord(out[i])
	}
	return out, nil
}

// newestFirst orders records by UpdatedAt, newest first, then by key.
func newestFirst(a, b Record) int {
	if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
		return c
	}
	return cmp.Compare(a.Key, b.Key)
}

// matches reports whether fields passes every filter. Numbers compare by value: as integers
// when both are, else as floats (as the SQL backends do).
func matches(fields map[string]any, filters []Filter) bool {
	for _, f := range filters {
		got, ok := fields[f.Field]
		if !ok {
			return false
		}
		switch want := f.Value.(type) {
		case string, bool:
			if got != want {
				return false
			}
		case int64:
			n, ok := got.(json.Number)
			if !ok {
				return false
			}
			if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
				if i != want {
					return false
				}
			} else if fl, err := n.Float64(); err != nil || fl != float64(want) {
				return false
			}
		case float64:
			n, ok := got.(json.Number)
			if !ok {
				return false
			}
			if fl, err := n.Float64(); err != nil || fl != want {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// Delete implements Backend.
func (m *Memory) Delete(ctx context.Context, store, key string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.stores[store][key]; !ok {
		return false, nil
	}
	delete(m.stores[store], key)
	return true, nil
}

// History implements Backend.
func (m *Memory) History(ctx context.Context, store, key string, keep int) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := []Record{}
	if e := m.stores[store][key]; e != nil {
		for i := len(e.versions) - 1; i >= 0 && len(out) <= keep; i-- {
			out = append(out, copyRecord(e.versions[i]))
		}
	}
	return out, nil
}

// Close implements Backend; it has nothing to release.
func (m *Memory) Close() error { return nil }

// copyRecord returns rec with its own Value and Trace.
func copyRecord(rec Record) Record {
	rec.Value = bytes.Clone(rec.Value)
	if rec.Trace != nil {
		t := *rec.Trace
		rec.Trace = &t
	}
	return rec
}

// traceOf is the Record.Trace of a write's trace: nil when it names nothing.
func traceOf(t Trace) *Trace {
	if t == (Trace{}) {
		return nil
	}
	return &t
}
