package agent

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Model providers accepted in svc.json "models".
const (
	ProviderOpenAI           = "openai"
	ProviderAnthropic        = "anthropic"
	ProviderOpenAICompatible = "openai-compatible"
	ProviderEcho             = "echo"
)

// Store backends accepted in svc.json "stores".
const (
	BackendMemory   = "memory"
	BackendSQLite   = "sqlite"
	BackendPostgres = "postgres"
)

// DeployFilterOf reads the ci.deploy entry of the svc.json of fsys as Load reads it (a byte order
// mark, comments of the strict parser's kind, and so on), without loading the rest of the tree:
// what a push's branch check needs. It returns nil when svc.json has no ci.deploy, and an error
// when svc.json cannot be read or is not the JSON Load accepts.
func DeployFilterOf(fsys fs.FS) (*DeployFilter, error) {
	data, err := fs.ReadFile(fsys, "svc.json")
	if err != nil {
		return nil, fmt.Errorf("read svc.json: %w", err)
	}
	var cfg Config
	if _, issues := decodeJSONStrict(data, &cfg); len(issues) > 0 {
		return nil, fmt.Errorf("svc.json:%d: %s", issues[0].line, issues[0].message)
	}
	if cfg.CI == nil {
		return nil, nil
	}
	return cfg.CI.Deploy, nil
}

// parseConfig decodes and validates svc.json, and returns the positions of its fields for the
// checks of references made later.
func parseConfig(file string, data []byte, c *collector) (Config, *jsonDoc) {
	var cfg Config
	doc, issues := decodeJSONStrict(data, &cfg)
	c.addJSON(file, issues)
	if len(issues) > 0 && len(doc.lines) == 0 {
		return cfg, doc // not JSON at all: the "missing field" problems would only repeat that
	}
	doc.require(c, file, "name", strings.TrimSpace(cfg.Name) == "", "")
	doc.require(c, file, "version", strings.TrimSpace(cfg.Version) == "", "")
	for _, key := range sortedKeys(cfg.Models) {
		checkModel(file, "models."+key, cfg.Models[key], doc, c)
	}
	if s := cfg.Stores; s != nil {
		switch s.Backend {
		case BackendMemory, BackendSQLite, BackendPostgres:
		default:
			c.add(file, doc.lineOr("stores.backend", "stores"), "field %q must be one of memory, sqlite, postgres; got %q", "stores.backend", s.Backend)
		}
		if s.URL != "" {
			if msg := checkEnvRef("stores.url", s.URL); msg != "" {
				c.add(file, doc.line("stores.url"), "%s", msg)
			}
		}
	}
	checkChannels(file, cfg.Channels, doc, c)
	if g := cfg.Guardrails; g != nil && g.PreInput != nil {
		checkPatterns(file, "guardrails.preInput.block", g.PreInput.Block, false, doc, c)
		checkPatterns(file, "guardrails.preInput.redact", g.PreInput.Redact, true, doc, c)
	}
	if cfg.CI != nil && cfg.CI.Deploy != nil {
		for i, pattern := range cfg.CI.Deploy.Branches {
			field := "ci.deploy.branches[" + strconv.Itoa(i) + "]"
			if pattern == "" {
				c.add(file, doc.line(field), "field %q: empty branch pattern", field)
				continue
			}
			if _, err := path.Match(pattern, ""); err != nil {
				c.add(file, doc.line(field), "field %q: invalid glob pattern %q: %v", field, pattern, err)
			}
		}
	}
	return cfg, doc
}

// checkPatterns reports every guardrail pattern of list that does not compile, with its line.
func checkPatterns(file, field string, list []string, named bool, doc *jsonDoc, c *collector) {
	for i, pat := range list {
		f := field + "[" + strconv.Itoa(i) + "]"
		if _, ok := RedactPatterns[pat]; ok && named {
			continue
		}
		if _, err := compileGuard(pat); err != nil {
			hint := ""
			if named {
				hint = " (or one of the names email, card)"
			}
			c.add(file, doc.lineOr(f, field), "field %q: %v%s", f, err, hint)
		}
	}
}

func checkModel(file, field string, m ModelRef, doc *jsonDoc, c *collector) {
	line := doc.lineOr(field+".provider", field)
	switch m.Provider {
	case ProviderOpenAI, ProviderAnthropic, ProviderOpenAICompatible, ProviderEcho:
	case "":
		doc.require(c, file, field+".provider", true, "")
	default:
		c.add(file, line, "field %q must be one of openai, anthropic, openai-compatible, echo; got %q", field+".provider", m.Provider)
	}
	doc.require(c, file, field+".model", m.Model == "" && m.Provider != ProviderEcho, "")
	if m.Provider == ProviderOpenAICompatible && m.BaseURL == "" {
		c.add(file, doc.line(field), "missing field %q: provider openai-compatible needs it", field+".baseUrl")
	}
	if m.BaseURL != "" {
		if msg := checkBaseURL(field+".baseUrl", m.BaseURL); msg != "" {
			c.add(file, doc.line(field+".baseUrl"), "%s", msg)
		}
	}
	if m.APIKey != "" {
		if msg := checkEnvRef(field+".apiKey", m.APIKey); msg != "" {
			c.add(file, doc.line(field+".apiKey"), "%s", msg)
		}
	}
	switch m.Effort {
	case "", "low", "medium", "high":
	default:
		c.add(file, doc.lineOr(field+".effort", field), "field %q must be low, medium or high; got %q", field+".effort", m.Effort)
	}
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
