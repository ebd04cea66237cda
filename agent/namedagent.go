package agent

import "fmt"

// Store access modes of agents/<agent>/agent.json "stores".
const (
	ModeRead      = "r"
	ModeReadWrite = "rw"
)

// parseAgentJSON decodes and validates agents/<dir>/agent.json. References to tools, skills,
// connections and stores are checked later, once everything is parsed.
func parseAgentJSON(file, dir string, data []byte, c *collector) (*NamedAgent, *jsonDoc) {
	a := &NamedAgent{}
	doc, issues := decodeJSONStrict(data, a)
	c.addJSON(file, issues)
	if len(issues) > 0 && len(doc.lines) == 0 {
		a.Name = dir
		return a, doc
	}
	switch a.Name {
	case dir:
	case "":
		doc.require(c, file, "name", true, fmt.Sprintf("the folder name, %q", dir))
	default:
		c.add(file, doc.line("name"), "field %q is %q but must equal the folder name %q", "name", a.Name, dir)
	}
	a.Name = dir
	for _, store := range sortedKeys(a.Stores) {
		switch mode := a.Stores[store]; mode {
		case ModeRead, ModeReadWrite:
		default:
			c.add(file, doc.line("stores."+store), "store %q: access mode must be %q or %q, got %q", store, ModeRead, ModeReadWrite, mode)
		}
	}
	return a, doc
}
