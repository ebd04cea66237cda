package storestest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"svc/agent"
	"svc/runner/stores"
)

// Factory returns the backend of the agent agentID. Calls with the same id share records;
// calls with different ids must not see each other's records. The suite closes nothing: the
// factory's owner does, when the test ends.
type Factory func(agentID string) stores.Backend

// Run runs the suite; newFactory is called once per subtest and must return backends with no
// records yet (for a shared database, fresh agent ids do).
func Run(t *testing.T, newFactory func(t *testing.T) Factory) {
	tests := []struct {
		name string
		fn   func(t *testing.T, f Factory)
	}{
		{"Missing", testMissing},
		{"SetGet", testSetGet},
		{"Copies", testCopies},
		{"History", testHistory},
		{"HistoryNone", testHistoryNone},
		{"Query", testQuery},
		{"QueryLimits", testQueryLimits},
		{"QueryTies", testQueryTies},
		{"Delete", testDelete},
		{"ConcurrentSets", testConcurrentSets},
		{"AgentIsolation", testAgentIsolation},
		{"StoreIsolation", testStoreIsolation},
		{"Traces", testTraces},
		{"Cancelled", testCancelled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newFactory(t)) })
	}
}

// Base is the first instant of the suite's clock; each reading is one millisecond later.
var Base = time.Date(2026, 5, 6, 7, 8, 9, 123_456_000, time.UTC)

// Definitions are the stores of the suite: tickets (traced, 3 earlier versions), notes and
// drafts (same schema, no history) and counters (100 earlier versions, for concurrent sets).
func Definitions() map[string]*agent.Store {
	tickets := &agent.Store{Name: "tickets", Trace: true, Entity: agent.StoreEntity{
		Name: "Ticket", Key: "{customer_id}-{number}",
		Schema: map[string]agent.StoreField{
			"customer_id": {Type: "string"},
			"number":      {Type: "integer"},
			"subject":     {Type: "string"},
			"status":      {Type: "enum", Values: []string{"open", "pending", "closed"}},
			"amount_eur":  {Type: "number"},
			"urgent":      {Type: "boolean"},
			"tags":        {Type: "array"},
			"meta":        {Type: "object"},
		},
	}}
	tickets.History.Versions = 3
	note := func(name string) *agent.Store {
		return &agent.Store{Name: name, Entity: agent.StoreEntity{
			Name: "Note", Key: "{id}",
			Schema: map[string]agent.StoreField{"id": {Type: "string"}, "text": {Type: "string"}},
		}}
	}
	counters := &agent.Store{Name: "counters", Entity: agent.StoreEntity{
		Name: "Counter", Key: "{id}",
		Schema: map[string]agent.StoreField{"id": {Type: "string"}, "writer": {Type: "integer"}, "n": {Type: "integer"}},
	}}
	counters.History.Versions = 100
	return map[string]*agent.Store{"tickets": tickets, "notes": note("notes"), "drafts": note("drafts"), "counters": counters}
}

// clock is a fake time source, safe for concurrent use.
type clock struct {
	mu sync.Mutex
	n  int
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return Base.Add(time.Duration(c.n-1) * time.Millisecond)
}

// at is the time of the clock's i-th reading (from 0).
func at(i int) time.Time { return Base.Add(time.Duration(i) * time.Millisecond) }

func newRecords(t *testing.T, b stores.Backend) *stores.Records {
	t.Helper()
	r, err := stores.New(stores.Params{Stores: Definitions(), Backend: b, Now: (&clock{}).now})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustSet(t *testing.T, r *stores.Records, store, fields string, tr stores.Trace) stores.Record {
	t.Helper()
	rec, err := r.Set(context.Background(), store, json.RawMessage(fields), tr)
	if err != nil {
		t.Fatalf("Set(%s, %s): %v", store, fields, err)
	}
	return rec
}

func mustGet(t *testing.T, r *stores.Records, store, key string) stores.Record {
	t.Helper()
	rec, err := r.Get(context.Background(), store, key)
	if err != nil {
		t.Fatalf("Get(%s, %s): %v", store, key, err)
	}
	return rec
}

func mustHistory(t *testing.T, r *stores.Records, store, key string) []stores.Record {
	t.Helper()
	recs, err := r.History(context.Background(), store, key)
	if err != nil {
		t.Fatalf("History(%s, %s): %v", store, key, err)
	}
	return recs
}

func mustQuery(t *testing.T, r *stores.Records, store string, q stores.Query) []stores.Record {
	t.Helper()
	recs, err := r.Query(context.Background(), store, q)
	if err != nil {
		t.Fatalf("Query(%s, %+v): %v", store, q, err)
	}
	return recs
}

// keys lists the keys of recs, in order.
func keys(recs []stores.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Key
	}
	return out
}

// versions lists the versions of recs, in order.
func versions(recs []stores.Record) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.Version
	}
	return out
}

func testMissing(t *testing.T, f Factory) {
	r := newRecords(t, f("agent-1"))
	ctx := context.Background()
	if _, err := r.Get(ctx, "tickets", "nope"); !errors.Is(err, stores.ErrNotFound) {
		t.Errorf("Get(missing) err = %v, want ErrNotFound", err)
	}
	if got := mustHistory(t, r, "tickets", "nope"); len(got) != 0 {
		t.Errorf("History(missing) = %v, want none", got)
	}
	if deleted, err := r.Delete(ctx, "tickets", "nope"); err != nil || deleted {
		t.Errorf("Delete(missing) = %v, %v; want false, nil", deleted, err)
	}
	if got := mustQuery(t, r, "tickets", stores.Query{}); got == nil || len(got) != 0 {
		t.Errorf("Query(empty store) = %#v, want an empty slice", got)
	}
}

func testSetGet(t *testing.T, f Factory) {
	r := newRecords(t, f("agent-1"))
	fields := `{"customer_id": "acme", "number": 7.0, "subject": "Refund <now> & then", "status": "open",
		"amount_eur": 12.50, "urgent": true, "tags": ["a", 1, null], "meta": {"z": 1, "a": {"b": [true]}}}`
	want := stores.Record{
		Key: "acme-7", Version: 1, UpdatedAt: at(0),
		Value: json.RawMessage(`{"amount_eur":12.50,"customer_id":"acme","meta":{"a":{"b":[true]},"z":1},"number":7,"status":"open","subject":"Refund <now> & then","tags":["a",1,null],"urgent":true}`),
	}
	got := mustSet(t, r, "tickets", fields, stores.Trace{})
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("Set (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want, mustGet(t, r, "tickets", "acme-7")); d != "" {
		t.Fatalf("Get (-want +got):\n%s", d)
	}
	// A second set replaces the whole record: fields left out are gone.
	want2 := stores.Record{Key: "acme-7", Version: 2, UpdatedAt: at(1), Value: json.RawMessage(`{"customer_id":"acme","number":7,"status":"closed"}`)}
	if d := cmp.Diff(want2, mustSet(t, r, "tickets", `{"customer_id":"acme","number":7,"status":"closed"}`, stores.Trace{})); d != "" {
		t.Fatalf("second Set (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want2, mustGet(t, r, "tickets", "acme-7")); d != "" {
		t.Fatalf("Get after second Set (-want +got):\n%s", d)
	}
}

func testCopies(t *testing.T, f Factory) {
	r := newRecords(t, f("agent-1"))
	fields := []byte(`{"id":"n1","text":"first"}`)
	rec, err := r.Set(context.Background(), "notes", fields, stores.Trace{})
	if err != nil {
		t.Fatal(err)
	}
	copy(fields, `{"id":"n1","text":"XXXXX"}`)
	rec.Value[len(rec.Value)-3] = 'X'
	got := mustGet(t, r, "notes", "n1")
	got.Value[len(got.Value)-3] = 'Y'
	if again := mustGet(t, r, "notes", "n1"); string(again.Value) != `{"id":"n1","text":"first"}` {
		t.Fatalf("the backend shares its value with a caller: %s", again.Value)
	}
}

func testHistory(t *testing.T, f Factory) {
	r := newRecords(t, f("agent-1"))
	set := func(i int) {
		mustSet(t, r, "tickets", fmt.Sprintf(`{"customer_id":"c","number":1,"subject":"v%d"}`, i), stores.Trace{})
	}
	value := func(i int) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"customer_id":"c","number":1,"subject":"v%d"}`, i))
	}
	want := func(newest, oldest int) []stores.Record {
		var out []stores.Record
		for v := newest; v >= oldest; v-- {
			out = append(out, stores.Record{Key: "c-1", Version: int64(v), Value: value(v), UpdatedAt: at(v - 1)})
		}
		return out
	}
	// history.versions is 3: after 3 writes all 3 are there; after 4 (versions+1) the current
	// and 3 earlier; after 5 the oldest is gone.
	for i := 1; i <= 3; i++ {
		set(i)
	}
	if d := cmp.Diff(want(3, 1), mustHistory(t, r, "tickets", "c-1")); d != "" {
		t.Fatalf("History after 3 writes (-want +got):\n%s", d)
	}
	set(4)
	if d := cmp.Diff(want(4, 1), mustHistory(t, r, "tickets", "c-1")); d != "" {
		t.Fatalf("History after 4 writes (-want +got):\n%s", d)
	}
	set(5)
	if d := cmp.Diff(want(5, 2), mustHistory(t, r, "tickets", "c-1")); d != "" {
		t.Fatalf("History after 5 writes (-want +got):\n%s", d)
	}
	if got := mustGet(t, r, "tickets", "c-1"); got.Version != 5 {
		t.Fatalf("Get version = %d, want 5", got.Version)
	}
	// Another key has its own versions.
	other := mustSet(t, r, "tickets", `{"customer_id":"c","number":2}`, stores.Trace{})
	if other.Version != 1 {
		t.Fatalf("first version of another key = %d, want 1", other.Version)
	}
}

func testHistoryNone(t *testing.T, f Factory) {
	r := newRecords(t, f("agent-1"))
	for i := range 3 {
		mustSet(t, r, "notes", fmt.Sprintf(`{"id":"n","text":"t%d"}`, i), stores.Trace{})
	}
	got := mustHistory(t, r, "notes", "n")
	want := []stores.Record{{Key: "n", Version: 3, Value: json.RawMessage(`{"id":"n","text":"t2"}`), UpdatedAt: at(2)}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("History with history.versions 0 (-want +got):\n%s", d)
	}
}

func testQuery(t *testing.T, f Factory) {
	r := newRecords(t, f("agent-1"))
	for _, fields := range []string{
		`{"customer_id":"a","number":1,"status":"open","amount_eur":2,"urgent":true}`,
		`{"customer_id":"a","number":2,"status":"closed","amount_eur":2.5,"urgent":false}`,
		`{"customer_id":"b","number":1,"status":"open","amount_eur":2.0}`,
		`{"customer_id":"b","number":2,"status":"pending","tags":["open"],"meta":{"status":"open"}}`,
		`{"customer_id":"c","number":10000000000,"status":"open","subject":"it's \"quoted\""}`,
	} {
		mustSet(t, r, "tickets", fields, stores.Trace{})
	}
	// a-1 is rewritten last: it becomes the newest.
	mustSet(t, r, "tickets", `{"customer_id":"a","number":1,"status":"open","amount_eur":2,"urgent":true}`, stores.Trace{})
	tests := []struct {
		name  string
		where map[string]any
		want  []string
	}{
		{"all, newest first", nil, []string{"a-1", "c-10000000000", "b-2", "b-1", "a-2"}},
		{"enum", map[string]any{"status": "open"}, []string{"a-1", "c-10000000000", "b-1"}},
		{"string", map[string]any{"customer_id": "b"}, []string{"b-2", "b-1"}},
		{"two fields", map[string]any{"customer_id": "a", "status": "open"}, []string{"a-1"}},
		{"integer", map[string]any{"number": json.Number("2")}, []string{"b-2", "a-2"}},
		{"large integer", map[string]any{"number": int64(10000000000)}, []string{"c-10000000000"}},
		{"integer written with a fraction", map[string]any{"number": json.Number("1.0")}, []string{"a-1", "b-1"}},
		{"number equal to an integer", map[string]any{"amount_eur": json.Number("2")}, []string{"a-1", "b-1"}},
		{"number with a fraction", map[string]any{"amount_eur": 2.5}, []string{"a-2"}},
		{"boolean true", map[string]any{"urgent": true}, []string{"a-1"}},
		{"boolean false", map[string]any{"urgent": false}, []string{"a-2"}},
		{"quotes in a string", map[string]any{"subject": `it's "quoted"`}, []string{"c-10000000000"}},
		{"no match", map[string]any{"customer_id": "zzz"}, []string{}},
		{"absent field", map[string]any{"subject": "none"}, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := keys(mustQuery(t, r, "tickets", stores.Query{Where: tc.where}))
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("keys (-want +got):\n%s", d)
			}
		})
	}
	if got := keys(mustQuery(t, r, "tickets", stores.Query{Where: map[string]any{"status": "open"}, Limit: 2})); !slices.Equal(got, []string{"a-1", "c-10000000000"}) {
		t.Errorf("limit 2 = %v", got)
	}
	// Items are whole records.
	items := mustQuery(t, r, "tickets", stores.Query{Where: map[string]any{"customer_id": "a", "number": 1}})
	want := []stores.Record{{Key: "a-1", Version: 2, UpdatedAt: at(5),
		Value: json.RawMessage(`{"amount_eur":2,"customer_id":"a","number":1,"status":"open","urgent":true}`)}}
	if d := cmp.Diff(want, items); d != "" {
		t.Errorf("items (-want +got):\n%s", d)
	}
	bad := []struct {
		where map[string]any
		field string
	}{
		{map[string]any{"colour": "red"}, "where.colour"},
		{map[string]any{"status": "done"}, "where.status"},
		{map[string]any{"number": "1"}, "where.number"},
		{map[string]any{"number": 1.5}, "where.number"},
		{map[string]any{"urgent": "yes"}, "where.urgent"},
		{map[string]any{"tags": []any{"open"}}, "where.tags"},
		{map[string]any{"meta": map[string]any{}}, "where.meta"},
		{map[string]any{"subject": nil}, "where.subject"},
	}
	for _, tc := range bad {
		_, err := r.Query(context.Background(), "tickets", stores.Query{Where: tc.where})
		var fe *stores.FieldError
		if !errors.Is(err, stores.ErrInvalid) || !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("Query(%v) err = %v, want a FieldError naming %s", tc.where, err, tc.field)
		}
	}
}

func testQueryLimits(t *testing.T, f Factory) {
	r := newRecords(t, f("agent-1"))
	const n = stores.MaxLimit + 1
	for i := range n {
		mustSet(t, r, "notes", fmt.Sprintf(`{"id":"n%03d"}`, i), stores.Trace{})
	}
	newest := func(count int) []string {
		var out []string
		for i := n - 1; i >= n-count; i-- {
			out = append(out, fmt.Sprintf("n%03d", i))
		}
		return out
	}
	if d := cmp.Diff(newest(stores.DefaultLimit), keys(mustQuery(t, r, "notes", stores.Query{}))); d != "" {
		t.Errorf("default limit (-want +got):\n%s", d)
	}
	if d := cmp.Diff(newest(stores.MaxLimit), keys(mustQuery(t, r, "notes", stores.Query{Limit: stores.MaxLimit}))); d != "" {
		t.Errorf("limit 500 (-want +got):\n%s", d)
	}
	if d := cmp.Diff(newest(1), keys(mustQuery(t, r, "notes", stores.Query{Limit: 1}))); d != "" {
		t.Errorf("limit 1 (-want +got):\n%s", d)
	}
	for _, limit := range []int{stores.MaxLimit + 1, -1} {
		_, err := r.Query(context.Background(), "notes", stores.Query{Limit: limit})
		var fe *stores.FieldError
		if !errors.As(err, &fe) || fe.Field != "limit" || !errors.Is(err, stores.ErrInvalid) {
			t.Errorf("Query(limit %d) err = %v, want a FieldError naming limit", limit, err)
		}
	}
}

func testQueryTies(t *testing.T, f Factory) {
	// Records written at the same instant come in key order, bytewise: upper case before "_"
	// before lower case, whatever the database's collation.
	r, err := stores.New(stores.Params{Stores: Definitions(), Backend: f("agent-1"), Now: func() time.Time { return Base }})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"b", "B", "a", "_", "a b", "ab", "é"} {
		mustSet(t, r, "notes", fmt.Sprintf(`{"id":%q}`, id), stores.Trace{})
	}
	want := []string{"B", "_", "a", "a b", "ab", "b", "é"}
	if d := cmp.Diff(want, keys(mustQuery(t, r, "notes", stores.Query{}))); d != "" {
		t.Fatalf("keys of one instant (-want +got):\n%s", d)
	}
}

func testDelete(t *testing.T, f Factory) {
	r := newRecords(t, f("agent-1"))
	ctx := context.Background()
	for i := range 3 {
		mustSet(t, r, "tickets", fmt.Sprintf(`{"customer_id":"c","number":1,"subject":"s%d"}`, i), stores.Trace{})
	}
	mustSet(t, r, "tickets", `{"customer_id":"c","number":2}`, stores.Trace{})
	if deleted, err := r.Delete(ctx, "tickets", "c-1"); err != nil || !deleted {
		t.Fatalf("Delete = %v, %v; want true, nil", deleted, err)
	}
	if _, err := r.Get(ctx, "tickets", "c-1"); !errors.Is(err, stores.ErrNotFound) {
		t.Fatalf("Get after Delete err = %v, want ErrNotFound", err)
	}
	if got := mustHistory(t, r, "tickets", "c-1"); len(got) != 0 {
		t.Fatalf("History after Delete = %v, want none", versions(got))
	}
	if got := keys(mustQuery(t, r, "tickets", stores.Query{})); !slices.Equal(got, []string{"c-2"}) {
		t.Fatalf("Query after Delete = %v, want [c-2]", got)
	}
	if deleted, err := r.Delete(ctx, "tickets", "c-1"); err != nil || deleted {
		t.Fatalf("second Delete = %v, %v; want false, nil", deleted, err)
	}
	// Written again, the key starts over, with no history from before.
	if rec := mustSet(t, r, "tickets", `{"customer_id":"c","number":1,"subject":"again"}`, stores.Trace{}); rec.Version != 1 {
		t.Fatalf("Set after Delete: version %d, want 1", rec.Version)
	}
	mustSet(t, r, "tickets", `{"customer_id":"c","number":1,"subject":"again 2"}`, stores.Trace{})
	if got := versions(mustHistory(t, r, "tickets", "c-1")); !slices.Equal(got, []int64{2, 1}) {
		t.Fatalf("History after re-create = %v, want [2 1]", got)
	}
}

func testConcurrentSets(t *testing.T, f Factory) {
	r := newRecords(t, f("agent-1"))
	const writers, each = 8, 10
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		got  = map[int64]string{} // version → writer/n that Set returned it for
	)
	for w := range writers {
		wg.Go(func() {
			for n := range each {
				rec, err := r.Set(context.Background(), "counters", json.RawMessage(fmt.Sprintf(`{"id":"k","writer":%d,"n":%d}`, w, n)), stores.Trace{})
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else if prev, dup := got[rec.Version]; dup {
					errs = append(errs, fmt.Errorf("version %d returned twice: to %s and to %d/%d", rec.Version, prev, w, n))
				} else {
					got[rec.Version] = fmt.Sprintf("%d/%d", w, n)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	const total = writers * each
	if cur := mustGet(t, r, "counters", "k"); cur.Version != total {
		t.Fatalf("current version = %d, want %d", cur.Version, total)
	}
	hist := mustHistory(t, r, "counters", "k")
	if len(hist) != total {
		t.Fatalf("History has %d versions, want %d: %v", len(hist), total, versions(hist))
	}
	seen := map[string]bool{}
	for i, rec := range hist {
		if want := int64(total - i); rec.Version != want {
			t.Fatalf("History[%d].Version = %d, want %d", i, rec.Version, want)
		}
		var v struct{ Writer, N int }
		if err := json.Unmarshal(rec.Value, &v); err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("%d/%d", v.Writer, v.N)
		if got[rec.Version] != id {
			t.Errorf("version %d holds %s, but Set returned it to %s", rec.Version, id, got[rec.Version])
		}
		seen[id] = true
	}
	if len(seen) != total {
		t.Fatalf("History holds %d distinct writes, want %d: a write was lost", len(seen), total)
	}
}

func testAgentIsolation(t *testing.T, f Factory) {
	a, b := newRecords(t, f("agent-a")), newRecords(t, f("agent-b"))
	ctx := context.Background()
	mustSet(t, a, "notes", `{"id":"same","text":"from a"}`, stores.Trace{})
	mustSet(t, a, "notes", `{"id":"only-a"}`, stores.Trace{})
	mustSet(t, b, "notes", `{"id":"same","text":"from b"}`, stores.Trace{})
	if got := mustGet(t, a, "notes", "same"); got.Version != 1 || string(got.Value) != `{"id":"same","text":"from a"}` {
		t.Fatalf("agent a reads %d %s", got.Version, got.Value)
	}
	if got := mustGet(t, b, "notes", "same"); got.Version != 1 || string(got.Value) != `{"id":"same","text":"from b"}` {
		t.Fatalf("agent b reads %d %s", got.Version, got.Value)
	}
	if _, err := b.Get(ctx, "notes", "only-a"); !errors.Is(err, stores.ErrNotFound) {
		t.Fatalf("agent b reads agent a's record: err = %v", err)
	}
	if got := keys(mustQuery(t, b, "notes", stores.Query{})); !slices.Equal(got, []string{"same"}) {
		t.Fatalf("agent b's query = %v, want [same]", got)
	}
	if deleted, err := b.Delete(ctx, "notes", "only-a"); err != nil || deleted {
		t.Fatalf("agent b deletes agent a's record: %v, %v", deleted, err)
	}
	if deleted, err := b.Delete(ctx, "notes", "same"); err != nil || !deleted {
		t.Fatalf("agent b's delete = %v, %v", deleted, err)
	}
	if got := mustGet(t, a, "notes", "same"); string(got.Value) != `{"id":"same","text":"from a"}` {
		t.Fatalf("agent b's delete removed agent a's record: %s", got.Value)
	}
	// The same agent id sees the same records.
	if got := mustGet(t, newRecords(t, f("agent-a")), "notes", "only-a"); got.Version != 1 {
		t.Fatalf("a second backend of agent a reads version %d", got.Version)
	}
}

func testStoreIsolation(t *testing.T, f Factory) {
	r := newRecords(t, f("agent-1"))
	ctx := context.Background()
	mustSet(t, r, "notes", `{"id":"k","text":"note"}`, stores.Trace{})
	mustSet(t, r, "notes", `{"id":"k","text":"note 2"}`, stores.Trace{})
	if _, err := r.Get(ctx, "drafts", "k"); !errors.Is(err, stores.ErrNotFound) {
		t.Fatalf("drafts reads a record of notes: err = %v", err)
	}
	if got := mustQuery(t, r, "drafts", stores.Query{}); len(got) != 0 {
		t.Fatalf("drafts' query = %v", keys(got))
	}
	if rec := mustSet(t, r, "drafts", `{"id":"k","text":"draft"}`, stores.Trace{}); rec.Version != 1 {
		t.Fatalf("first version in drafts = %d, want 1", rec.Version)
	}
	if deleted, err := r.Delete(ctx, "drafts", "k"); err != nil || !deleted {
		t.Fatalf("Delete(drafts) = %v, %v", deleted, err)
	}
	if got := mustGet(t, r, "notes", "k"); got.Version != 2 || string(got.Value) != `{"id":"k","text":"note 2"}` {
		t.Fatalf("notes after drafts' delete: %d %s", got.Version, got.Value)
	}
}

func testTraces(t *testing.T, f Factory) {
	r := newRecords(t, f("agent-1"))
	t1 := stores.Trace{SessionID: "s1", ToolCallID: "call_1"}
	t2 := stores.Trace{SessionID: "s2", ToolCallID: "call_2"}
	if rec := mustSet(t, r, "tickets", `{"customer_id":"c","number":1}`, t1); rec.Trace == nil || *rec.Trace != t1 {
		t.Fatalf("Set returned trace %v, want %v", rec.Trace, t1)
	}
	mustSet(t, r, "tickets", `{"customer_id":"c","number":1,"status":"closed"}`, t2)
	mustSet(t, r, "tickets", `{"customer_id":"c","number":1,"status":"open"}`, stores.Trace{}) // a route's write
	hist := mustHistory(t, r, "tickets", "c-1")
	want := []*stores.Trace{nil, &t2, &t1}
	got := make([]*stores.Trace, len(hist))
	for i := range hist {
		got[i] = hist[i].Trace
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("traces of the history, newest first (-want +got):\n%s", d)
	}
	if got := mustGet(t, r, "tickets", "c-1"); got.Trace != nil {
		t.Fatalf("Get: trace %v of an untraced write", got.Trace)
	}
	mustSet(t, r, "tickets", `{"customer_id":"c","number":1,"status":"pending"}`, t2)
	if got := mustGet(t, r, "tickets", "c-1"); got.Trace == nil || *got.Trace != t2 {
		t.Fatalf("Get: trace %v, want %v", got.Trace, t2)
	}
	if got := mustQuery(t, r, "tickets", stores.Query{}); len(got) != 1 || got[0].Trace == nil || *got[0].Trace != t2 {
		t.Fatalf("Query: %+v, want the trace %v", got, t2)
	}
	// A store without "trace": true records none.
	if rec := mustSet(t, r, "notes", `{"id":"n"}`, t1); rec.Trace != nil {
		t.Fatalf("untraced store: Set returned trace %v", rec.Trace)
	}
	if hist := mustHistory(t, r, "notes", "n"); len(hist) != 1 || hist[0].Trace != nil {
		t.Fatalf("untraced store: history %+v", hist)
	}
}

func testCancelled(t *testing.T, f Factory) {
	r := newRecords(t, f("agent-1"))
	mustSet(t, r, "notes", `{"id":"n"}`, stores.Trace{})
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("test over"))
	if _, err := r.Get(ctx, "notes", "n"); err == nil {
		t.Error("Get with a cancelled context succeeded")
	}
	if _, err := r.Set(ctx, "notes", json.RawMessage(`{"id":"n"}`), stores.Trace{}); err == nil {
		t.Error("Set with a cancelled context succeeded")
	}
	if got := mustGet(t, r, "notes", "n"); got.Version != 1 {
		t.Errorf("version after a cancelled Set = %d, want 1", got.Version)
	}
}
