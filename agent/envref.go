package agent

import (
	"fmt"
	"net/url"
	"strings"
)

// EnvPrefix starts a reference to a secret or setting that is resolved at run time, never in source.
const EnvPrefix = "env:"

// ParseEnvRef returns NAME for a value "env:NAME" with NAME matching [A-Z_][A-Z0-9_]*;
// ok is false for any other value.
func ParseEnvRef(value string) (name string, ok bool) {
	name, found := strings.CutPrefix(value, EnvPrefix)
	if !found || !validEnvName(name) {
		return "", false
	}
	return name, true
}

func validEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		switch {
		case r == '_' || r >= 'A' && r <= 'Z':
		case i > 0 && r >= '0' && r <= '9':
		default:
			return false
		}
	}
	return true
}

// checkEnvRef returns a problem message when value is not a valid env: reference, else "".
func checkEnvRef(field, value string) string {
	name, found := strings.CutPrefix(value, EnvPrefix)
	if !found {
		return fmt.Sprintf("field %q must be an env: reference such as \"env:NAME\"; secrets do not belong in source", field)
	}
	if !validEnvName(name) {
		return fmt.Sprintf("field %q: invalid variable name %q in env: reference (want [A-Z_][A-Z0-9_]*)", field, name)
	}
	return ""
}

// checkBaseURL returns a problem message when value is neither an absolute http(s) URL nor a valid
// env: reference, else "".
func checkBaseURL(field, value string) string {
	if strings.HasPrefix(value, EnvPrefix) {
		return checkEnvRef(field, value)
	}
	u, err := url.Parse(value)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Sprintf("field %q must be an absolute http(s) URL or an env: reference, got %q", field, value)
	}
	return ""
}

// maxNameLength bounds the names of tools, stores, connections, agents and knowledge documents:
// model APIs accept tool names of at most 64 characters.
const maxNameLength = 64

// checkName returns a problem message when name is not usable as the name of kind
// (letters, digits, '_' and '-', starting with a letter or digit, at most 64 characters), else "".
func checkName(kind, name string) string {
	ok := name != "" && len(name) <= maxNameLength
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case i > 0 && (r == '_' || r == '-'):
		default:
			ok = false
		}
	}
	if !ok {
		return fmt.Sprintf("invalid %s name %q: use letters, digits, '_' and '-' (at most %d, starting with a letter or digit)", kind, name, maxNameLength)
	}
	return ""
}

// EnvRef is one env: reference of an agent source: a value a runtime resolves (the agent's
// secrets first, then its environment) when the part of the agent that uses it runs. A build
// checks each one and warns about those that resolve to nothing.
type EnvRef struct {
	Name  string // NAME of env:NAME
	File  string // the file that holds it: "svc.json", "svc/connections/status/spec.json"
	Field string // the field within the file: "stores.url", "models.main.apiKey", "auth.headers.Authorization"
	Use   string // what fails while it is unset: "the store tools", "model main", "connection status"
	// Implicit marks a variable the source does not name: a model of provider openai or
	// anthropic with neither apiKey nor baseUrl reads its provider's key variable
	// (OPENAI_API_KEY, ANTHROPIC_API_KEY).
	Implicit bool
}

// ProviderKeyVar returns the variable a model of provider reads its API key from when svc.json
// gives no apiKey, or "" for providers without one.
func ProviderKeyVar(provider string) string {
	switch provider {
	case ProviderOpenAI:
		return "OPENAI_API_KEY"
	case ProviderAnthropic:
		return "ANTHROPIC_API_KEY"
	}
	return ""
}

// EnvRefs returns every env: reference of the agent, in a fixed order: svc.json models (by
// key), then stores.url (when the backend is a database), then the channels' settings (slack,
// telegram, webhook), then each connection (by name): its
// baseUrl and its auth headers and query values (by name). A stores.url of backend memory is
// left out: it is not used.
func (a *Agent) EnvRefs() []EnvRef {
	var out []EnvRef
	add := func(file, field, use, value string) {
		if name, ok := ParseEnvRef(value); ok {
			out = append(out, EnvRef{Name: name, File: file, Field: field, Use: use})
		}
	}
	for _, key := range sortedKeys(a.Config.Models) {
		m, field, use := a.Config.Models[key], "models."+key, "model "+key
		add(ConfigFile, field+".apiKey", use, m.APIKey)
		add(ConfigFile, field+".baseUrl", use, m.BaseURL)
		if v := ProviderKeyVar(m.Provider); v != "" && m.APIKey == "" && m.BaseURL == "" {
			out = append(out, EnvRef{Name: v, File: ConfigFile, Field: field + ".apiKey", Use: use, Implicit: true})
		}
	}
	if s := a.Config.Stores; s != nil && s.Backend != BackendMemory {
		add(ConfigFile, "stores.url", "the store tools and store routes", s.URL)
	}
	for _, name := range []string{ChannelSlack, ChannelTelegram, ChannelWebhook} {
		entry, _ := a.Config.Channels.Channel(name)
		for _, set := range entry.Settings {
			add(ConfigFile, set.Field, "channel "+name, set.Value)
		}
	}
	for _, name := range sortedKeys(a.Connections) {
		cn := a.Connections[name]
		file, use := "svc/connections/"+name+"/spec.json", "connection "+name
		add(file, "baseUrl", use, cn.Spec.BaseURL)
		if auth := cn.Spec.Auth; auth != nil {
			for _, k := range sortedKeys(auth.Headers) {
				add(file, "auth.headers."+k, use, auth.Headers[k])
			}
			for _, k := range sortedKeys(auth.Query) {
				add(file, "auth.query."+k, use, auth.Query[k])
			}
		}
	}
	return out
}
