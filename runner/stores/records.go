package stores

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"svc/agent"
)

// Params configure New. Zero values are documented defaults.
type Params struct {
	// Stores are the agent's store definitions by name (agent.Agent.Stores).
	Stores map[string]*agent.Store
	// Backend keeps the records (Open chooses it). Required.
	Backend Backend
	// Now is the clock of UpdatedAt; nil means time.Now.
	Now func() time.Time
	// OnWrite, when set, is told of every version written (after the write), by the store
	// tools and the store routes alike: the runtime's store triggers (CONTRACT §9).
	OnWrite func(ctx context.Context, store string, rec Record)
}

// Query selects records for Records.Query.
type Query struct {
	// Where keeps the records whose fields equal these values (decoded JSON: json.Number or a
	// Go int, int64 or float64 for numbers). Fields of type object and array are refused.
	Where map[string]any
	// Limit is the most records returned, 1..MaxLimit; 0 means DefaultLimit.
	Limit int
}

// Records is the records of one agent's stores: every read and write of the store tools and
// the runtime's store routes goes through it. It refuses unknown stores (ErrUnknownStore) and
// bad input (ErrInvalid, naming the field) before the backend is called, renders keys from the
// entity's key template, and applies each store's history.versions and trace settings, so
// that every backend keeps the same rules. It is safe for concurrent use.
type Records struct {
	entities map[string]*entity
	backend  Backend
	now      func() time.Time
	onWrite  func(ctx context.Context, store string, rec Record)
}

// New returns the records of p.Stores kept by p.Backend. It fails for a store whose key
// template cannot be rendered (the build refuses such a tree).
func New(p Params) (*Records, error) {
	if p.Backend == nil {
		return nil, fmt.Errorf("stores: New needs a Backend")
	}
	r := &Records{entities: make(map[string]*entity, len(p.Stores)), backend: p.Backend, now: p.Now, onWrite: p.OnWrite}
	if r.now == nil {
		r.now = time.Now
	}
	for name, def := range p.Stores {
		e, err := newEntity(name, def)
		if err != nil {
			return nil, err
		}
		r.entities[name] = e
	}
	return r, nil
}

func (r *Records) entity(store string) (*entity, error) {
	e, ok := r.entities[store]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownStore, store)
	}
	return e, nil
}

// Get returns the current version of key in store, or ErrNotFound.
func (r *Records) Get(ctx context.Context, store, key string) (Record, error) {
	if _, err := r.entity(store); err != nil {
		return Record{}, err
	}
	if err := checkKey(key); err != nil {
		return Record{}, err
	}
	return r.backend.Get(ctx, store, key)
}

// Set checks fields (a JSON object of the entity's fields: types checked, enum values
// enforced, unknown fields refused, the key's fields required) and writes them as the next
// version of the record whose key they render. The fields replace the whole record: a field
// left out is absent from the new version. tr is recorded when the store traces writes.
func (r *Records) Set(ctx context.Context, store string, fields json.RawMessage, tr Trace) (Record, error) {
	return r.put(ctx, store, "", fields, tr)
}

// Put is Set for a caller that names the key too (PUT /stores/{store}/{key}): the fields must
// render that key, or the error names "key".
func (r *Records) Put(ctx context.Context, store, key string, fields json.RawMessage, tr Trace) (Record, error) {
	if err := checkKey(key); err != nil {
		return Record{}, err
	}
	return r.put(ctx, store, key, fields, tr)
}

func (r *Records) put(ctx context.Context, store, want string, fields json.RawMessage, tr Trace) (Record, error) {
	e, err := r.entity(store)
	if err != nil {
		return Record{}, err
	}
	key, value, err := e.record(fields)
	if err != nil {
		return Record{}, err
	}
	if want != "" && key != want {
		return Record{}, fieldErr("key", "the fields give the key %q (from %q), not %q", key, e.def.Entity.Key, want)
	}
	w := Write{At: r.now().UTC().Truncate(time.Microsecond), Keep: max(e.def.History.Versions, 0)}
	if e.def.Trace {
		w.Trace = tr
	}
	rec, err := r.backend.Set(ctx, store, key, value, w)
	if err == nil && r.onWrite != nil {
		r.onWrite(ctx, store, rec)
	}
	return rec, err
}

// Query returns the current records of store that pass q, newest first.
func (r *Records) Query(ctx context.Context, store string, q Query) ([]Record, error) {
	e, err := r.entity(store)
	if err != nil {
		return nil, err
	}
	m := Match{Limit: q.Limit}
	if m.Limit == 0 {
		m.Limit = DefaultLimit
	}
	if m.Limit < 1 || m.Limit > MaxLimit {
		return nil, fieldErr("limit", "must be between 1 and %d, got %d", MaxLimit, q.Limit)
	}
	if m.Filters, err = e.filters(q.Where); err != nil {
		return nil, err
	}
	return r.backend.Query(ctx, store, m)
}

// Delete removes key's record from store, with its history; deleted is false when there was
// none.
func (r *Records) Delete(ctx context.Context, store, key string) (deleted bool, err error) {
	if _, err := r.entity(store); err != nil {
		return false, err
	}
	if err := checkKey(key); err != nil {
		return false, err
	}
	return r.backend.Delete(ctx, store, key)
}

// History returns key's current version and at most history.versions earlier ones, newest
// first, each with its trace when the store traces writes; empty when the key has no record.
func (r *Records) History(ctx context.Context, store, key string) ([]Record, error) {
	e, err := r.entity(store)
	if err != nil {
		return nil, err
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	return r.backend.History(ctx, store, key, max(e.def.History.Versions, 0))
}
