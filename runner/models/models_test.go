package models_test

import (
	"errors"
	"strings"
	"testing"

	"svc/runner/models"
)

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		cfg     models.Config
		want    string // type of the provider, or "" for an error
		errPart string
	}{
		{cfg: models.Config{Provider: "openai", Model: "gpt-4o"}, want: "*models.OpenAI"},
		{cfg: models.Config{Provider: "anthropic", Model: "claude-sonnet-4-5"}, want: "*models.Anthropic"},
		{cfg: models.Config{Provider: "openai-compatible", BaseURL: "http://127.0.0.1:11434/v1"}, want: "*models.OpenAI"},
		{cfg: models.Config{Provider: "echo"}, want: "models.Echo"},
		{cfg: models.Config{Provider: "openai-compatible"}, errPart: "openai-compatible requires baseUrl"},
		{cfg: models.Config{Provider: "openai-compatible", BaseURL: "  "}, errPart: "requires baseUrl"},
		{cfg: models.Config{Provider: "gemini"}, errPart: `"gemini"`},
		{cfg: models.Config{Provider: ""}, errPart: "provider is empty"},
		{cfg: models.Config{Provider: "echo", Effort: "max"}, errPart: `effort "max"`},
	} {
		p, err := models.New(tc.cfg, nil)
		if tc.want != "" {
			if err != nil {
				t.Errorf("New(%+v): %v", tc.cfg, err)
				continue
			}
			if got := typeName(p); got != tc.want {
				t.Errorf("New(%+v) = %s, want %s", tc.cfg, got, tc.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.errPart) {
			t.Errorf("New(%+v) error = %v, want one containing %q", tc.cfg, err, tc.errPart)
		}
	}
	if _, err := models.New(models.Config{Provider: "gemini"}, nil); !errors.Is(err, models.ErrUnknownProvider) {
		t.Errorf("unknown provider: error %v does not wrap ErrUnknownProvider", err)
	}
}

// typeName names a provider's dynamic type.
func typeName(p models.Provider) string {
	switch p.(type) {
	case *models.OpenAI:
		return "*models.OpenAI"
	case *models.Anthropic:
		return "*models.Anthropic"
	case models.Echo:
		return "models.Echo"
	}
	return "unknown"
}

func TestContextWindow(t *testing.T) {
	for _, tc := range []struct {
		provider, model string
		want            int
	}{
		{"openai", "gpt-4o", 128000},
		{"openai", "gpt-4o-mini-2024-07-18", 128000},
		{"openai", "gpt-4.1-mini", 1047576},
		{"openai", "gpt-4-0613", 8192},
		{"openai", "gpt-5-mini", 400000},
		{"openai", "o1-mini", 128000},
		{"openai", "o3-mini", 200000},
		{"anthropic", "claude-sonnet-4-5", 200000},
		{"anthropic", "anything", 200000},
		{"openai-compatible", "claude-3-haiku", 200000},
		{"openai-compatible", "llama3.1:8b", models.DefaultContextWindow},
		{"echo", "", models.DefaultContextWindow},
	} {
		if got := models.ContextWindow(tc.provider, tc.model); got != tc.want {
			t.Errorf("ContextWindow(%q, %q) = %d, want %d", tc.provider, tc.model, got, tc.want)
		}
	}
}

func TestAPIErrorMessage(t *testing.T) {
	for _, tc := range []struct {
		err  models.APIError
		want string
	}{
		{models.APIError{Provider: "openai", StatusCode: 429, Message: "slow down"}, "openai: HTTP 429: slow down"},
		{models.APIError{Provider: "anthropic", Message: "connection reset"}, "anthropic: connection reset"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}
