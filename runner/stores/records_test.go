package stores_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"svc/agent"
	"svc/runner/stores"
	"svc/runner/stores/storestest"
)

func newMemoryRecords(t *testing.T) *stores.Records {
	t.Helper()
	r, err := stores.New(stores.Params{Stores: storestest.Definitions(), Backend: stores.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// fieldsOf returns the fields named by the FieldErrors err holds (errors.Join of several, or one).
func fieldsOf(err error) []string {
	var out []string
	var walk func(error)
	walk = func(err error) {
		var fe *stores.FieldError
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
		} else if errors.As(err, &fe) {
			out = append(out, fe.Field)
		}
	}
	walk(err)
	return out
}

func TestSetRefusesBadRecords(t *testing.T) {
	r := newMemoryRecords(t)
	long := strings.Repeat("x", stores.MaxKeyBytes)
	tests := []struct {
		name   string
		fields string
		want   []string // the fields the error names, in order
		text   string   // a part of the message
	}{
		{"not an object", `["a"]`, []string{""}, "must be a JSON object"},
		{"null", `null`, []string{""}, "must be a JSON object"},
		{"two objects", `{"customer_id":"a","number":1} {}`, []string{""}, "one JSON object"},
		{"unknown field", `{"customer_id":"a","number":1,"colour":"red"}`, []string{"colour"}, "unknown field; Ticket has the fields amount_eur, customer_id, meta, number, status, subject, tags, urgent"},
		{"missing key field", `{"customer_id":"a"}`, []string{"number"}, `missing; it is part of the key "{customer_id}-{number}"`},
		{"every problem", `{"number":"1","status":"done","x":1}`, []string{"number", "status", "x", "customer_id"}, ""},
		{"string as integer", `{"customer_id":"a","number":"1"}`, []string{"number"}, `must be an integer, got the string "1"`},
		{"fraction as integer", `{"customer_id":"a","number":1.5}`, []string{"number"}, "must be an integer (64-bit), got 1.5"},
		{"huge integer", `{"customer_id":"a","number":1e30}`, []string{"number"}, "must be an integer (64-bit)"},
		{"huge number", `{"customer_id":"a","number":1,"amount_eur":1e999}`, []string{"amount_eur"}, "within the range"},
		{"enum value", `{"customer_id":"a","number":1,"status":"done"}`, []string{"status"}, `must be one of open, pending, closed; got "done"`},
		{"enum type", `{"customer_id":"a","number":1,"status":1}`, []string{"status"}, "must be a string, got the number 1"},
		{"boolean", `{"customer_id":"a","number":1,"urgent":"yes"}`, []string{"urgent"}, `must be true or false, got the string "yes"`},
		{"null field", `{"customer_id":"a","number":1,"subject":null}`, []string{"subject"}, "must be a string, got null"},
		{"object", `{"customer_id":"a","number":1,"meta":[]}`, []string{"meta"}, "must be an object, got an array"},
		{"array", `{"customer_id":"a","number":1,"tags":{}}`, []string{"tags"}, "must be an array, got an object"},
		{"NUL in text", `{"customer_id":"a","number":1,"subject":"a\u0000b"}`, []string{"subject"}, "NUL"},
		{"NUL deep inside", `{"customer_id":"a","number":1,"meta":{"a":[1,{"b":"\u0000"}]}}`, []string{"meta.a[1].b"}, "NUL"},
		{"empty key part", `{"customer_id":"","number":1}`, []string{"customer_id"}, "must not be empty: it is part of the key"},
		{"key too long", `{"customer_id":"` + long + `","number":1}`, []string{"key"}, "a key has at most 512"},
		{"value too big", `{"customer_id":"a","number":1,"subject":"` + strings.Repeat("x", stores.MaxValueBytes) + `"}`, []string{""}, "a record holds at most"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.Set(context.Background(), "tickets", json.RawMessage(tc.fields), stores.Trace{})
			if !errors.Is(err, stores.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if got := fieldsOf(err); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("fields named = %q, want %q (err %v)", got, tc.want, err)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("err = %q, want it to contain %q", err, tc.text)
			}
		})
	}
	if got, err := r.Query(context.Background(), "tickets", stores.Query{}); err != nil || len(got) != 0 {
		t.Fatalf("a refused set wrote something: %v, %v", got, err)
	}
}

func TestKeys(t *testing.T) {
	defs := map[string]*agent.Store{"s": {Name: "s", Entity: agent.StoreEntity{
		Name: "E", Key: "pre/{b}:{n}:{x}/{o}{b}",
		Schema: map[string]agent.StoreField{
			"b": {Type: "boolean"}, "n": {Type: "number"}, "x": {Type: "integer"}, "o": {Type: "object"},
		},
	}}}
	r, err := stores.New(stores.Params{Stores: defs, Backend: stores.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := r.Set(context.Background(), "s", json.RawMessage(`{"b":true,"n":2.50,"x":3.0,"o":{"z":1,"a":"<&>"}}`), stores.Trace{})
	if err != nil {
		t.Fatal(err)
	}
	if want := `pre/true:2.5:3/{"a":"<&>","z":1}true`; rec.Key != want {
		t.Fatalf("key = %q, want %q", rec.Key, want)
	}
	if want := `{"b":true,"n":2.50,"o":{"a":"<&>","z":1},"x":3}`; string(rec.Value) != want {
		t.Fatalf("value = %s, want %s", rec.Value, want)
	}
}

func TestPutChecksTheKey(t *testing.T) {
	r := newMemoryRecords(t)
	ctx := context.Background()
	rec, err := r.Put(ctx, "tickets", "a-1", json.RawMessage(`{"customer_id":"a","number":1}`), stores.Trace{})
	if err != nil || rec.Key != "a-1" {
		t.Fatalf("Put = %+v, %v", rec, err)
	}
	_, err = r.Put(ctx, "tickets", "a-2", json.RawMessage(`{"customer_id":"a","number":1}`), stores.Trace{})
	var fe *stores.FieldError
	if !errors.As(err, &fe) || fe.Field != "key" || !strings.Contains(err.Error(), `give the key "a-1"`) {
		t.Fatalf("Put with another key: err = %v, want a FieldError naming key", err)
	}
}

func TestKeyArguments(t *testing.T) {
	r := newMemoryRecords(t)
	ctx := context.Background()
	for _, key := range []string{"", strings.Repeat("k", stores.MaxKeyBytes+1), "a\x00b", "\xff"} {
		_, errGet := r.Get(ctx, "tickets", key)
		_, errDel := r.Delete(ctx, "tickets", key)
		_, errHist := r.History(ctx, "tickets", key)
		for _, err := range []error{errGet, errDel, errHist} {
			var fe *stores.FieldError
			if !errors.As(err, &fe) || fe.Field != "key" || !errors.Is(err, stores.ErrInvalid) {
				t.Errorf("key %q: err = %v, want a FieldError naming key", key, err)
			}
		}
	}
}

func TestUnknownStore(t *testing.T) {
	r := newMemoryRecords(t)
	ctx := context.Background()
	_, e1 := r.Get(ctx, "ghost", "k")
	_, e2 := r.Set(ctx, "ghost", json.RawMessage(`{}`), stores.Trace{})
	_, e3 := r.Query(ctx, "ghost", stores.Query{})
	_, e4 := r.Delete(ctx, "ghost", "k")
	_, e5 := r.History(ctx, "ghost", "k")
	for i, err := range []error{e1, e2, e3, e4, e5} {
		if !errors.Is(err, stores.ErrUnknownStore) || !strings.Contains(err.Error(), `"ghost"`) {
			t.Errorf("call %d: err = %v, want ErrUnknownStore naming ghost", i, err)
		}
	}
}

func TestNewRefusesBadKeyTemplates(t *testing.T) {
	for _, key := range []string{"plain", "{id", "{nope}"} {
		defs := map[string]*agent.Store{"s": {Name: "s", Entity: agent.StoreEntity{
			Name: "E", Key: key, Schema: map[string]agent.StoreField{"id": {Type: "string"}},
		}}}
		if _, err := stores.New(stores.Params{Stores: defs, Backend: stores.NewMemory()}); err == nil || !strings.Contains(err.Error(), "entity.key") {
			t.Errorf("New with key %q: err = %v, want one naming entity.key", key, err)
		}
	}
	if _, err := stores.New(stores.Params{}); err == nil {
		t.Error("New without a backend succeeded")
	}
}
