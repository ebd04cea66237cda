package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseEnvRef(t *testing.T) {
	tests := []struct {
		value, name string
		ok          bool
	}{
		{"env:STATUS_API_URL", "STATUS_API_URL", true},
		{"env:_X9", "_X9", true},
		{"env:A", "A", true},
		{"env:", "", false},
		{"env:9A", "", false},
		{"env:lower", "", false},
		{"env:A-B", "", false},
		{"env: A", "", false},
		{"ENV:A", "", false},
		{"https://x", "", false},
	}
	for _, tt := range tests {
		name, ok := ParseEnvRef(tt.value)
		if name != tt.name || ok != tt.ok {
			t.Errorf("ParseEnvRef(%q) = %q, %v; want %q, %v", tt.value, name, ok, tt.name, tt.ok)
		}
	}
}

func TestCheckBaseURL(t *testing.T) {
	tests := []struct {
		value string
		ok    bool
	}{
		{"https://api.example.com/v1", true},
		{"http://127.0.0.1:8080", true},
		{"env:API_URL", true},
		{"env:api", false},
		{"api.example.com", false},
		{"/relative", false},
		{"ftp://x", false},
		{"https://", false},
		{"", false},
	}
	for _, tt := range tests {
		if msg := checkBaseURL("baseUrl", tt.value); (msg == "") != tt.ok {
			t.Errorf("checkBaseURL(%q) = %q, want ok %v", tt.value, msg, tt.ok)
		}
	}
}

func TestEnvRefs(t *testing.T) {
	t.Run("support-desk", func(t *testing.T) {
		a, ps := loadFixture(t, "support-desk")
		if ps != nil {
			t.Fatal(ps)
		}
		want := []EnvRef{
			{Name: "SUPPORT_DB_URL", File: "svc.json", Field: "stores.url", Use: "the store tools and store routes"},
			{Name: "STATUS_API_URL", File: "svc/connections/status/spec.json", Field: "baseUrl", Use: "connection status"},
			{Name: "STATUS_API_TOKEN", File: "svc/connections/status/spec.json", Field: "auth.headers.Authorization", Use: "connection status"},
		}
		if diff := cmp.Diff(want, a.EnvRefs()); diff != "" {
			t.Errorf("EnvRefs (-want +got):\n%s", diff)
		}
	})
	t.Run("models and stores", func(t *testing.T) {
		a := &Agent{Config: Config{
			Models: map[string]ModelRef{
				"main":   {Provider: ProviderOpenAI, Model: "gpt"},                                    // the provider's key, implicitly
				"fast":   {Provider: ProviderAnthropic, Model: "c", APIKey: "env:FAST_KEY"},           // named
				"local":  {Provider: ProviderOpenAI, Model: "m", BaseURL: "http://127.0.0.1:1/v1"},    // a server of one's own: no key assumed
				"compat": {Provider: ProviderOpenAICompatible, Model: "m", BaseURL: "env:COMPAT_URL"}, // no key variable
				"echo":   {Provider: ProviderEcho},
			},
			Stores: &StoresConfig{Backend: BackendMemory, URL: "env:UNUSED"},
		}}
		want := []EnvRef{
			{Name: "COMPAT_URL", File: "svc.json", Field: "models.compat.baseUrl", Use: "model compat"},
			{Name: "FAST_KEY", File: "svc.json", Field: "models.fast.apiKey", Use: "model fast"},
			{Name: "OPENAI_API_KEY", File: "svc.json", Field: "models.main.apiKey", Use: "model main", Implicit: true},
		}
		if diff := cmp.Diff(want, a.EnvRefs()); diff != "" {
			t.Errorf("EnvRefs (-want +got):\n%s", diff)
		}
	})
}
