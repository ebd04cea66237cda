package runtime

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"svc/agent"
	"svc/runner/models"
)

// NewModels returns the default Options.Models: it resolves env: references of a model
// reference with env, falls back to the provider's usual variables (OPENAI_API_KEY,
// OPENAI_BASE_URL, ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL) when the reference names no key or
// endpoint, and keeps one provider per distinct reference. A reference of provider openai or
// anthropic without a key whose calls would go to the provider's public API is an error naming
// the variable (checkKey). env nil resolves nothing. client nil
// means a client whose transport keeps enough idle connections per model host for many
// concurrent streams (the default transport keeps 2, so a busy runtime would dial a new
// connection for most model calls).
func NewModels(env func(string) (string, bool), client *http.Client) func(agent.ModelRef) (models.Provider, error) {
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	if client == nil {
		client = &http.Client{Transport: ModelTransport()}
	}
	var mu sync.Mutex
	cache := map[agent.ModelRef]models.Provider{}
	return func(ref agent.ModelRef) (models.Provider, error) {
		mu.Lock()
		defer mu.Unlock()
		if p, ok := cache[ref]; ok {
			return p, nil
		}
		cfg := models.Config{Provider: ref.Provider, Model: ref.Model, Effort: ref.Effort}
		var err error
		if cfg.APIKey, err = resolveRef("apiKey", ref.APIKey, env); err != nil {
			return nil, err
		}
		if cfg.BaseURL, err = resolveRef("baseUrl", ref.BaseURL, env); err != nil {
			return nil, err
		}
		keyVar, urlVar := "", ""
		switch ref.Provider {
		case models.ProviderOpenAI:
			keyVar, urlVar = "OPENAI_API_KEY", "OPENAI_BASE_URL"
		case models.ProviderAnthropic:
			keyVar, urlVar = "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"
		}
		if cfg.APIKey == "" && keyVar != "" {
			cfg.APIKey, _ = env(keyVar)
		}
		if cfg.BaseURL == "" && urlVar != "" {
			cfg.BaseURL, _ = env(urlVar)
		}
		if err := checkKey(cfg, keyVar); err != nil {
			return nil, err
		}
		p, err := models.New(cfg, client)
		if err != nil {
			return nil, err
		}
		cache[ref] = p
		return p, nil
	}
}

// checkKey refuses a model of provider openai or anthropic without an API key whose calls
// would go to the provider's public API: the conversation would be sent to a third party only
// to be refused there. A base URL of the operator's own (a gateway that adds the key, a local
// server) may go without one, as openai-compatible may.
func checkKey(cfg models.Config, keyVar string) error {
	if cfg.APIKey != "" || keyVar == "" {
		return nil
	}
	public, base := "api.openai.com", models.DefaultOpenAIBaseURL
	if cfg.Provider == models.ProviderAnthropic {
		public, base = "api.anthropic.com", "https://api.anthropic.com"
	}
	if cfg.BaseURL != "" {
		u, err := url.Parse(strings.TrimSpace(cfg.BaseURL))
		if err != nil || !strings.EqualFold(u.Hostname(), public) {
			return nil // not the public API; a URL that does not parse fails on its own
		}
		base = cfg.BaseURL
	}
	return fmt.Errorf("apiKey: %s is not set (as an agent secret or in the runtime's environment, or as the model's apiKey in svc.json), and %s needs one", keyVar, base)
}

func resolveRef(field, value string, env func(string) (string, bool)) (string, error) {
	name, ok := strings.CutPrefix(value, "env:")
	if !ok {
		return value, nil
	}
	v, set := env(name)
	if !set || v == "" {
		return "", fmt.Errorf("%s: %s is not set; set it as an agent secret or in the runtime's environment", field, value)
	}
	return v, nil
}

// ParseModel reads a "provider/model" setting such as SVC_DEFAULT_MODEL ("openai/gpt-4o-mini",
// "anthropic/claude-sonnet-4-5", "echo"). "" is the zero reference.
func ParseModel(s string) (agent.ModelRef, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return agent.ModelRef{}, nil
	}
	provider, model, _ := strings.Cut(s, "/")
	switch provider {
	case models.ProviderOpenAI, models.ProviderAnthropic, models.ProviderOpenAICompatible:
		if model == "" {
			return agent.ModelRef{}, fmt.Errorf("model %q: want provider/model, such as openai/gpt-4o-mini", s)
		}
	case models.ProviderEcho:
		if model == "" {
			model = "echo"
		}
	default:
		return agent.ModelRef{}, fmt.Errorf("model %q: provider must be openai, anthropic, openai-compatible or echo", s)
	}
	return agent.ModelRef{Provider: provider, Model: model}, nil
}

// ModelTransport is the transport of model calls (models.NewTransport): HTTP/1.1 of its own,
// without a goroutine per connection, to a plain http:// model server; Go's transport, with a
// pool sized for a busy runtime, small connection buffers and HTTP/2 wherever the provider
// offers it (TLS ALPN; the OpenAI and Anthropic APIs do), to an https:// one. Over HTTP/2 the
// open streams to a host share a few connections; over HTTP/1.1 a streamed answer holds its
// connection for as long as the model writes, which is why that path keeps no goroutine of its
// own on it.
func ModelTransport() *models.Transport { return models.NewTransport() }
