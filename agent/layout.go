package agent

import (
	"slices"
	"strings"
)

// This file maps the layout of a source tree (SERVICE.md 2.9) to the parser of each file.

// svcKinds lists the folders allowed under svc/.
const svcKinds = "connections, knowledge, skills, stores, tools"

func isSVCKind(kind string) bool {
	switch kind {
	case "connections", "knowledge", "skills", "stores", "tools":
		return true
	}
	return false
}

// parse reads every known file of the listed tree, then checks the references between them.
func (l *loader) parse() {
	if data, ok := l.read(ConfigFile); ok {
		l.agent.Config, l.configDoc = parseConfig(ConfigFile, data, &l.c)
	} else if !l.tooBig[ConfigFile] {
		l.c.add(ConfigFile, 0, "missing %s (the agent's config file)", ConfigFile)
	}
	for d := range l.dirs {
		kind, ok := strings.CutPrefix(d, "svc/")
		if ok && !strings.Contains(kind, "/") && !isSVCKind(kind) {
			l.c.add(d, 0, "unknown folder svc/%s: expected one of %s", kind, svcKinds)
		}
	}
	l.parseStores()
	l.parseConnections()
	l.parseKnowledge()
	l.parseSkills()
	l.parseTools()
	l.parseAgents()
	l.parseEvals()
	l.checkReferences()
	l.checkChannelAgents(l.configDoc)
}

// subdirs returns the sorted names of the folders directly under parent.
func (l *loader) subdirs(parent string) []string {
	var names []string
	for d := range l.dirs {
		if rest, ok := strings.CutPrefix(d, parent+"/"); ok && !strings.Contains(rest, "/") {
			names = append(names, rest)
		}
	}
	slices.Sort(names)
	return names
}

// filesIn returns the sorted names of the files directly under parent ending in ext.
func (l *loader) filesIn(parent, ext string) []string {
	var names []string
	for _, f := range l.files {
		if rest, ok := strings.CutPrefix(f, parent+"/"); ok && !strings.Contains(rest, "/") && strings.HasSuffix(rest, ext) {
			names = append(names, rest)
		}
	}
	return names
}

func (l *loader) parseStores() {
	for _, file := range l.filesIn("svc/stores", ".json") {
		p := "svc/stores/" + file
		name := strings.TrimSuffix(file, ".json")
		data, ok := l.read(p)
		if !ok {
			continue
		}
		l.agent.Stores[name] = parseStore(p, name, data, &l.c)
	}
	checkStoreToolNames(l.agent.Stores, &l.c)
}

func (l *loader) parseConnections() {
	for _, name := range l.subdirs("svc/connections") {
		dir := "svc/connections/" + name
		if msg := checkName("connection", name); msg != "" {
			l.c.add(dir, 0, "%s", msg)
		}
		conn := &Connection{Name: name}
		l.agent.Connections[name] = conn
		if data, ok := l.read(dir + "/spec.json"); ok {
			conn.Spec = parseConnectionSpec(dir+"/spec.json", data, &l.c)
		} else if !l.tooBig[dir+"/spec.json"] {
			l.c.add(dir+"/spec.json", 0, "missing spec.json of connection %q", name)
		}
		if data, ok := l.read(dir + "/policy.json"); ok {
			conn.Policy = parsePolicy(dir+"/policy.json", data, conn.Spec.Format, &l.c)
		}
		if data, ok := l.read(dir + "/access.json"); ok {
			conn.Access = parseAccess(dir+"/access.json", data, conn.Spec.Format, &l.c)
		}
		if data, ok := l.read(dir + "/surface.md"); ok {
			if text, ok := markdownText(dir+"/surface.md", data, &l.c); ok {
				conn.Surface = text
			}
		}
	}
}

func (l *loader) parseKnowledge() {
	for _, file := range l.filesIn("svc/knowledge", ".md") {
		p := "svc/knowledge/" + file
		name := strings.TrimSuffix(file, ".md")
		if msg := checkName("knowledge document", name); msg != "" {
			l.c.add(p, 0, "%s", msg)
		}
		if data, ok := l.read(p); ok {
			l.agent.Knowledge[name] = parseKnowledge(p, name, data, &l.c)
		}
	}
}

func (l *loader) parseSkills() {
	for _, dir := range l.subdirs("svc/skills") {
		p := "svc/skills/" + dir + "/SKILL.md"
		data, ok := l.read(p)
		if !ok {
			if !l.tooBig[p] {
				l.c.add(p, 0, "missing SKILL.md of skill folder %q", dir)
			}
			continue
		}
		s := parseSkill(p, dir, data, &l.c)
		if s == nil {
			continue
		}
		if prev, dup := l.agent.Skills[s.Name]; dup {
			l.c.add(p, 1, "skill %q is also defined in svc/skills/%s/SKILL.md", s.Name, prev.Dir)
			continue
		}
		l.agent.Skills[s.Name] = s
	}
}

func (l *loader) parseTools() {
	for _, name := range l.subdirs("svc/tools") {
		dir := "svc/tools/" + name
		if msg := checkToolName(name); msg != "" {
			l.c.add(dir, 0, "%s", msg)
		}
		t := &Tool{Name: name, Layout: LayoutHandler}
		l.agent.Tools[name] = t
		source := dir + "/handler.ts"
		if l.has(dir + "/tool.ts") {
			t.Layout, source = LayoutToolTS, dir+"/tool.ts"
		} else if data, ok := l.read(dir + "/tool.json"); ok {
			parsed, doc := parseToolJSON(dir+"/tool.json", name, data, &l.c)
			parsed.Layout = t.Layout
			t = parsed
			l.agent.Tools[name] = t
			l.toolDocs[name] = doc
		} else if !l.tooBig[dir+"/tool.json"] {
			l.c.add(dir+"/tool.json", 0, "missing tool.json of tool %q (or a tool.ts)", name)
		}
		t.SourcePath = source
		data, ok := l.read(source)
		if !ok {
			if !l.tooBig[source] {
				l.c.add(source, 0, "missing handler.ts of tool %q", name)
			}
			continue
		}
		t.Source = string(data)
		t.JS = compileTypeScript(source, data, &l.c)
	}
}

func (l *loader) parseAgents() {
	for _, name := range l.subdirs("agents") {
		dir := "agents/" + name
		instructions, ok := l.read(dir + "/AGENT.md")
		if !ok {
			continue // a folder without AGENT.md is not an agent (notes, drafts)
		}
		if msg := checkName("agent", name); msg != "" {
			l.c.add(dir, 0, "%s", msg)
		}
		a := &NamedAgent{Name: name}
		if data, ok := l.read(dir + "/agent.json"); ok {
			var doc *jsonDoc
			a, doc = parseAgentJSON(dir+"/agent.json", name, data, &l.c)
			l.agentDocs[name] = doc
		}
		if text, ok := markdownText(dir+"/AGENT.md", instructions, &l.c); ok {
			if strings.TrimSpace(text) == "" {
				l.c.add(dir+"/AGENT.md", 0, "AGENT.md is empty; it holds the agent's instructions")
			}
			a.Instructions = text
		}
		l.agent.Agents[name] = a
	}
}

func (l *loader) parseEvals() {
	for _, file := range l.filesIn("evals", ".md") {
		p := "evals/" + file
		name := strings.TrimSuffix(file, ".md")
		if data, ok := l.read(p); ok {
			l.agent.Evals[name] = parseEval(p, name, data, &l.c)
		}
	}
}
