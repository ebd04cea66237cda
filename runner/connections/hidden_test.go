package connections

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHiddenStrip(t *testing.T) {
	h := newHidden([]string{"password", "customer.ssn", "orders.card.number", " ", "Token"})
	v, ok := decodeJSON([]byte(`[
		{"id": 1, "password": "p", "PASSWORD": "P", "customer": {"ssn": "1", "name": "a", "password": "q"},
		 "orders": [{"card": {"number": "4111", "brand": "visa"}}, {"card": [{"number": "5500"}]}],
		 "notes": {"customer": {"ssn": "kept: not at the top level"}},
		 "list": [[{"token": "t"}]]}
	]`))
	if !ok {
		t.Fatal("bad JSON")
	}
	h.strip(v)
	want := []any{map[string]any{
		"id": json.Number("1"), "customer": map[string]any{"name": "a"},
		"orders": []any{map[string]any{"card": map[string]any{"brand": "visa"}}, map[string]any{"card": []any{map[string]any{}}}},
		"notes":  map[string]any{"customer": map[string]any{"ssn": "kept: not at the top level"}},
		"list":   []any{[]any{map[string]any{}}},
	}}
	if d := cmp.Diff(want, v); d != "" {
		t.Errorf("strip (-want +got):\n%s", d)
	}
	if newHidden([]string{"", " "}) != nil {
		t.Error("a list of blanks hides something")
	}
	var none *hidden
	none.strip(v) // a nil hidden strips nothing and does not panic
}
