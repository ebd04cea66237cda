package agent

import "testing"

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
