package agent

import (
	"fmt"
	"slices"
	"strings"
)

// parseStore decodes and validates svc/stores/<name>.json.
func parseStore(file, name string, data []byte, c *collector) *Store {
	s := &Store{}
	doc, issues := decodeJSONStrict(data, s)
	c.addJSON(file, issues)
	if msg := checkName("store", name); msg != "" {
		c.add(file, 0, "%s", msg)
	}
	if len(issues) > 0 && len(doc.lines) == 0 {
		s.Name = name
		return s
	}
	switch s.Name {
	case name:
	case "":
		doc.require(c, file, "name", true, fmt.Sprintf("the file name, %q", name))
	default:
		c.add(file, doc.line("name"), "field %q is %q but must equal the file name %q", "name", s.Name, name)
	}
	s.Name = name
	e := s.Entity
	doc.require(c, file, "entity.name", e.Name == "", "")
	doc.require(c, file, "entity.schema", len(e.Schema) == 0, "at least one field")
	for _, field := range sortedKeys(e.Schema) {
		checkStoreField(file, "entity.schema."+field, e.Schema[field], doc, c)
	}
	doc.require(c, file, "entity.key", e.Key == "", `a template such as "{id}"`)
	if e.Key != "" {
		fields, err := KeyFields(e.Key)
		if err != nil {
			c.add(file, doc.line("entity.key"), "field %q: %v", "entity.key", err)
		}
		for _, f := range fields {
			if _, ok := e.Schema[f]; !ok {
				c.add(file, doc.line("entity.key"), "field %q: {%s} is not a field of entity.schema", "entity.key", f)
			}
		}
	}
	if s.History.Versions < 0 {
		c.add(file, doc.line("history.versions"), "field %q must be 0 or more, got %d", "history.versions", s.History.Versions)
	}
	return s
}

func checkStoreField(file, path string, f StoreField, doc *jsonDoc, c *collector) {
	line := doc.lineOr(path+".type", path)
	switch f.Type {
	case "string", "integer", "number", "boolean", "object", "array":
		if len(f.Values) > 0 {
			c.add(file, doc.line(path+".values"), "field %q: values are only allowed for type enum", path+".values")
		}
	case "enum":
		if len(f.Values) == 0 {
			c.add(file, line, "field %q: type enum needs a non-empty \"values\" list", path)
		}
		for i, v := range f.Values {
			if slices.Index(f.Values, v) < i {
				c.add(file, doc.line(fmt.Sprintf("%s.values[%d]", path, i)), "field %q: duplicate enum value %q", path+".values", v)
			}
		}
	case "":
		c.add(file, line, "missing required field %q", path+".type")
	default:
		c.add(file, line, "field %q must be one of string, integer, number, boolean, enum, object, array; got %q", path+".type", f.Type)
	}
}

// KeyFields returns the field names of a store key template such as "{customer_id}-{number}",
// in order. Text outside braces is literal; braces do not nest and every field is non-empty.
func KeyFields(template string) ([]string, error) {
	var fields []string
	rest := template
	for {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			break
		}
		if rest[open] == '}' {
			return fields, fmt.Errorf("unbalanced '}' in key template %q", template)
		}
		end := strings.IndexAny(rest[open+1:], "{}")
		if end < 0 || rest[open+1+end] == '{' {
			return fields, fmt.Errorf("unclosed '{' in key template %q", template)
		}
		name := rest[open+1 : open+1+end]
		if name == "" {
			return fields, fmt.Errorf("empty field {} in key template %q", template)
		}
		fields = append(fields, name)
		rest = rest[open+1+end+1:]
	}
	if len(fields) == 0 {
		return nil, fmt.Errorf("key template %q names no field; use {field}", template)
	}
	return fields, nil
}

// checkStoreToolNames reports stores whose generated tool names collide or are too long for model APIs.
func checkStoreToolNames(stores map[string]*Store, c *collector) {
	owner := map[string]string{}
	for _, name := range sortedKeys(stores) {
		file := "svc/stores/" + name + ".json"
		longest := StoreToolName(name, "history")
		if len(longest) > maxNameLength {
			c.add(file, 0, "store name %q is too long: its tool %q exceeds %d characters", name, longest, maxNameLength)
		}
		tool := StoreToolName(name, "get")
		if prev, dup := owner[tool]; dup {
			c.add(file, 0, "stores %q and %q generate the same tool names (%s)", prev, name, tool)
			continue
		}
		owner[tool] = name
	}
}
