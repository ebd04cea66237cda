package stores

import (
	"encoding/json"
	"fmt"
	"strings"

	"svc/agent"
)

// toolDescription says what the tool of action does, in terms of e's entity.
func toolDescription(e *entity, action string) string {
	ent, store, key := e.def.Entity.Name, e.store, e.def.Entity.Key
	keyed := fmt.Sprintf("The key is the template %s filled in with the record's fields.", key)
	switch action {
	case ActionGet:
		return fmt.Sprintf("Read the current version of one %s record of the store %s, by its key. %s Answers {key, version, value}, or {key, found: false}.", ent, store, keyed)
	case ActionSet:
		return fmt.Sprintf("Save one %s record in the store %s. Give the record's fields: they replace the whole record (a field left out is not kept from the earlier version). "+
			"The key is made from the template %s, so those fields are required. Each save is a new version, and %s. Answers {key, version, value}.",
			ent, store, key, keptOnSet(e.def.History.Versions))
	case ActionQuery:
		return fmt.Sprintf("List the current %s records of the store %s, newest first. where keeps the records whose fields equal the given values; limit is 1 to %d (default %d). Answers {items: [{key, version, value}]}.",
			ent, store, MaxLimit, DefaultLimit)
	case ActionDelete:
		return fmt.Sprintf("Delete one %s record of the store %s, with its earlier versions, by its key. %s Answers {key, deleted}; deleted is false when there was no such record.", ent, store, keyed)
	case ActionHistory:
		return fmt.Sprintf("Show the versions of one %s record of the store %s, newest first: %s, each with its updated_at. %s Answers {key, versions: [{version, value, updated_at}]}.",
			ent, store, shownByHistory(e.def.History.Versions), keyed)
	}
	return ""
}

// keptOnSet says how many earlier versions a store keeps, for the set tool.
func keptOnSet(n int) string {
	switch {
	case n <= 0:
		return "no earlier version is kept"
	case n == 1:
		return "the one before it is kept"
	}
	return fmt.Sprintf("up to %d earlier versions are kept", n)
}

// shownByHistory says which versions the history tool shows.
func shownByHistory(n int) string {
	switch {
	case n <= 0:
		return "the current one only (the store keeps no earlier version)"
	case n == 1:
		return "the current one and the one before it"
	}
	return fmt.Sprintf("the current one and up to %d earlier ones", n)
}

// toolParameters is the JSON Schema of the arguments of action.
func toolParameters(e *entity, action string) json.RawMessage {
	var schema map[string]any
	switch action {
	case ActionSet:
		props := map[string]any{}
		for _, name := range e.fields {
			p := fieldSchema(e.def.Entity.Schema[name])
			if e.keyOf[name] {
				p["description"] = "Part of the key " + e.def.Entity.Key + "."
			}
			props[name] = p
		}
		schema = map[string]any{"type": "object", "properties": props, "required": e.keys, "additionalProperties": false}
	case ActionQuery:
		props := map[string]any{}
		var names []string
		for _, name := range e.fields {
			if t := e.def.Entity.Schema[name].Type; t != typeObject && t != typeArray {
				props[name] = fieldSchema(e.def.Entity.Schema[name])
				names = append(names, name)
			}
		}
		// null stands for a field left out, as the tool reads it.
		schema = map[string]any{"type": "object", "properties": map[string]any{
			"where": map[string]any{
				"type":                 []string{"object", "null"},
				"description":          "Keep only the records whose fields equal these values (fields " + strings.Join(names, ", ") + ").",
				"properties":           props,
				"additionalProperties": false,
			},
			"limit": map[string]any{
				"type": []string{"integer", "null"}, "minimum": 1, "maximum": MaxLimit, "default": DefaultLimit,
				"description": fmt.Sprintf("The most records to return, 1 to %d; default %d.", MaxLimit, DefaultLimit),
			},
		}, "additionalProperties": false}
	default:
		schema = map[string]any{"type": "object", "properties": map[string]any{
			"key": map[string]any{"type": "string", "minLength": 1, "description": "The record's key: " + e.def.Entity.Key + " filled in with its fields."},
		}, "required": []string{"key"}, "additionalProperties": false}
	}
	b, err := encodeJSON(schema)
	if err != nil { // unreachable: the schema is plain data
		panic(err)
	}
	return b
}

// fieldSchema is the JSON Schema of one field of the entity.
func fieldSchema(f agent.StoreField) map[string]any {
	switch f.Type {
	case typeEnum:
		return map[string]any{"type": "string", "enum": f.Values}
	case typeArray:
		return map[string]any{"type": "array", "items": map[string]any{}} // OpenAI wants items
	}
	return map[string]any{"type": f.Type}
}
