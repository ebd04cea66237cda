package stores_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"svc/runner/stores"
	"svc/runner/tools"
)

// TestToolSchemasMatchTheTools: the parameter schema of each store tool (what the model is
// offered, and what the loop checks every call against) accepts what the tool accepts and
// refuses what it refuses, apart from the rules a schema does not state (keys that render
// empty or too long, text with NUL), listed here as such.
func TestToolSchemasMatchTheTools(t *testing.T) {
	r := newMemoryRecords(t)
	set := tools.NewSet(stores.Tools(r, map[string]string{"tickets": "rw"})...)
	tests := []struct {
		action, args string
		ok           bool
		schemaOnly   bool // the tool refuses it by a rule the schema does not state
	}{
		{"set", `{"customer_id":"a","number":1}`, true, false},
		{"set", `{"customer_id":"a","number":2,"subject":"s","status":"open","amount_eur":1.5,"urgent":true,"tags":[1,"x"],"meta":{"k":{"n":1}}}`, true, false},
		{"set", `{"customer_id":"a","number":3.0}`, true, false}, // an integer written with a fraction of zero
		{"set", `{"number":1}`, false, false},
		{"set", `{"customer_id":"a"}`, false, false},
		{"set", `{"customer_id":1,"number":1}`, false, false},
		{"set", `{"customer_id":"a","number":1.5}`, false, false},
		{"set", `{"customer_id":"a","number":"1"}`, false, false},
		{"set", `{"customer_id":"a","number":1,"status":"done"}`, false, false},
		{"set", `{"customer_id":"a","number":1,"amount_eur":"1"}`, false, false},
		{"set", `{"customer_id":"a","number":1,"urgent":"yes"}`, false, false},
		{"set", `{"customer_id":"a","number":1,"tags":{}}`, false, false},
		{"set", `{"customer_id":"a","number":1,"meta":[]}`, false, false},
		{"set", `{"customer_id":"a","number":1,"subject":null}`, false, false},
		{"set", `{"customer_id":"a","number":1,"owner":"jo"}`, false, false},
		{"set", `[]`, false, false},
		{"set", `{"customer_id":"","number":1}`, false, true},
		{"get", `{"key":"a-1"}`, true, false},
		{"get", `{}`, false, false},
		{"get", `{"key":""}`, false, false},
		{"get", `{"key":1}`, false, false},
		{"get", `{"key":"a-1","version":2}`, false, false},
		{"get", `{"key":"` + strings.Repeat("k", 600) + `"}`, false, true},
		{"delete", `{"key":"a-9"}`, true, false},
		{"delete", `{}`, false, false},
		{"history", `{"key":"a-1"}`, true, false},
		{"history", `{"key":null}`, false, false},
		{"query", `{}`, true, false},
		{"query", `{"where":{"customer_id":"a","status":"open","urgent":false},"limit":10}`, true, false},
		{"query", `{"where":null,"limit":null}`, true, false},
		{"query", `{"limit":500}`, true, false},
		{"query", `{"limit":0}`, false, false},
		{"query", `{"limit":501}`, false, false},
		{"query", `{"limit":2.5}`, false, false},
		{"query", `{"limit":"5"}`, false, false},
		{"query", `{"where":[]}`, false, false},
		{"query", `{"where":{"owner":"jo"}}`, false, false},
		{"query", `{"where":{"tags":[1]}}`, false, false},
		{"query", `{"where":{"status":"done"}}`, false, false},
		{"query", `{"where":{"number":"1"}}`, false, false},
		{"query", `{"order":"asc"}`, false, false},
	}
	for _, tt := range tests {
		name := "store__tickets__" + tt.action
		tool, _ := set.Get(name)
		schemaErr := set.Check(name, json.RawMessage(tt.args))
		if errors.Is(schemaErr, tools.ErrBadSchema) {
			t.Fatalf("%s: %v", name, schemaErr)
		}
		res, err := tool.Call(context.Background(), tools.Call{ID: "c", Arguments: json.RawMessage(tt.args)})
		toolOK := err == nil && !res.IsError
		schemaOK := schemaErr == nil
		switch {
		case tt.schemaOnly:
			if !schemaOK || toolOK {
				t.Errorf("%s %s: schema %v, tool %v %q; want the schema to accept it and the tool to refuse it", name, tt.args, schemaErr, err, res.Content)
			}
		case schemaOK != tt.ok || toolOK != tt.ok:
			t.Errorf("%s %s: schema says %v, the tool says %v %q; want both to accept it: %v", name, tt.args, schemaErr, err, res.Content, tt.ok)
		}
	}
}
