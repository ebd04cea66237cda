package agent

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func TestConfigProblems(t *testing.T) {
	svc := func(text string) map[string]string { return map[string]string{"svc.json": text} }
	runTreeCases(t, []treeCase{
		{name: "not JSON", files: svc(`{"name": "t",`),
			want: []Problem{{File: "svc.json", Line: 1, Message: "invalid JSON: unexpected end of file"}}},
		{name: "syntax error line", files: svc("{\n\"name\": \"t\",\n\"version\": 1.0.0\n}"),
			want: []Problem{{File: "svc.json", Line: 3, Message: "invalid JSON: invalid character '.' after object key:value pair"}}},
		{name: "trailing data", files: svc(`{"name": "t", "version": "1"} {}`),
			want: []Problem{{File: "svc.json", Line: 1, Message: "invalid JSON: unexpected data after the JSON value"}}},
		{name: "not an object", files: svc(`[]`),
			want: []Problem{{File: "svc.json", Line: 1, Message: "must be a JSON object, got an array"}}},
		{name: "empty file", files: svc(""),
			want: []Problem{{File: "svc.json", Line: 1, Message: "invalid JSON: unexpected end of file"}}},
		{name: "missing name and version", files: svc(`{}`),
			want: []Problem{
				{File: "svc.json", Message: `missing required field "name"`},
				{File: "svc.json", Message: `missing required field "version"`},
			}},
		{name: "empty version", files: svc(`{"name": "t", "version": " "}`),
			want: []Problem{{File: "svc.json", Line: 1, Message: `field "version" must not be empty`}}},
		{name: "wrong types name the field", files: svc("{\n  \"name\": 5,\n  \"version\": [\"1\"],\n  \"scope\": {\"requireScope\": \"yes\"}\n}"),
			want: []Problem{
				{File: "svc.json", Line: 2, Message: `field "name" must be a string, got a number`},
				{File: "svc.json", Line: 3, Message: `field "version" must be a string, got an array`},
				{File: "svc.json", Line: 4, Message: `field "scope.requireScope" must be a boolean, got a string`},
			}},
		{name: "every unknown field with its line", files: svc("{\n  \"name\": \"t\", \"version\": \"1\",\n  \"colour\": 1,\n  \"ci\": {\"deploy\": {\"branch\": [\"main\"]}},\n  \"Name\": \"case matters\"\n}"),
			want: []Problem{
				{File: "svc.json", Line: 3, Message: `unknown field "colour"`},
				{File: "svc.json", Line: 4, Message: `unknown field "ci.deploy.branch"`},
				{File: "svc.json", Line: 5, Message: `unknown field "Name"`},
			}},
		{name: "guardrail patterns that do not compile, with their lines", files: svc("{\"name\": \"t\", \"version\": \"1\", \"guardrails\": {\"preInput\": {\n  \"block\": [\"ok\", \"(unclosed\"],\n  \"redact\": [\"email\", \"card\", \"\", \"phone\\\\d+\", \"[z-a]\"],\n  \"mask\": []\n}}}"),
			want: []Problem{
				{File: "svc.json", Line: 2, Message: `field "guardrails.preInput.block[1]": invalid regular expression "(unclosed": missing closing ): ` + "`(unclosed`"},
				{File: "svc.json", Line: 3, Message: `field "guardrails.preInput.redact[2]": empty pattern (or one of the names email, card)`},
				{File: "svc.json", Line: 3, Message: `field "guardrails.preInput.redact[4]": invalid regular expression "[z-a]": invalid character class range: ` + "`z-a`" + ` (or one of the names email, card)`},
				{File: "svc.json", Line: 4, Message: `unknown field "guardrails.preInput.mask"`},
			}},
		{name: "duplicate field", files: svc("{\"name\": \"t\",\n\"name\": \"u\", \"version\": \"1\"}"),
			want: []Problem{{File: "svc.json", Line: 2, Message: `duplicate field "name"`}}},
		{name: "models", files: svc(`{"name": "t", "version": "1", "models": {
  "main": {"provider": "gpt", "model": "x"},
  "compat": {"provider": "openai-compatible", "model": "m"},
  "open": {"provider": "openai"},
  "keyed": {"provider": "anthropic", "model": "claude", "apiKey": "sk-123"},
  "badenv": {"provider": "openai", "model": "m", "apiKey": "env:lower_case", "baseUrl": "ftp://x"},
  "noprov": {"model": "m"}
}}`),
			want: []Problem{
				{File: "svc.json", Line: 2, Message: `field "models.main.provider" must be one of openai, anthropic, openai-compatible, echo; got "gpt"`},
				{File: "svc.json", Line: 3, Message: `missing field "models.compat.baseUrl": provider openai-compatible needs it`},
				{File: "svc.json", Line: 4, Message: `missing required field "models.open.model"`},
				{File: "svc.json", Line: 5, Message: `field "models.keyed.apiKey" must be an env: reference such as "env:NAME"; secrets do not belong in source`},
				{File: "svc.json", Line: 6, Message: `field "models.badenv.baseUrl" must be an absolute http(s) URL or an env: reference, got "ftp://x"`},
				{File: "svc.json", Line: 6, Message: `field "models.badenv.apiKey": invalid variable name "lower_case" in env: reference (want [A-Z_][A-Z0-9_]*)`},
				{File: "svc.json", Line: 7, Message: `missing required field "models.noprov.provider"`},
			}},
		{name: "stores", files: svc(`{"name": "t", "version": "1",
"stores": {"backend": "mysql",
  "url": "postgres://u:p@h/db"}}`),
			want: []Problem{
				{File: "svc.json", Line: 2, Message: `field "stores.backend" must be one of memory, sqlite, postgres; got "mysql"`},
				{File: "svc.json", Line: 3, Message: `field "stores.url" must be an env: reference such as "env:NAME"; secrets do not belong in source`},
			}},
		{name: "branch globs", files: svc(`{"name": "t", "version": "1", "ci": {"deploy": {"branches": [
  "main", "release/[", ""]}}}`),
			want: []Problem{
				{File: "svc.json", Line: 2, Message: `field "ci.deploy.branches[1]": invalid glob pattern "release/[": syntax error in pattern`},
				{File: "svc.json", Line: 2, Message: `field "ci.deploy.branches[2]": empty branch pattern`},
			}},
		{name: "effort", files: svc(`{"name": "t", "version": "1",
"models": {"main": {"provider": "openai", "model": "m",
  "effort": "extreme"}}}`),
			want: []Problem{{File: "svc.json", Line: 3, Message: `field "models.main.effort" must be low, medium or high; got "extreme"`}}},
		{name: "channels", files: svc(`{"name": "t", "version": "1", "channels": {
  "slack": {"signingSecret": "abc", "botToken": "env:SLACK_BOT_TOKEN", "agent": "nobody"},
  "telegram": {"secretToken": "env:TG_SECRET"},
  "webhook": {"secret": "env:HOOK", "replyUrl": "env:HOOK_URL", "colour": 1}}}`),
			want: []Problem{
				{File: "svc.json", Line: 2, Message: `field "channels.slack.signingSecret" must be an env: reference such as "env:NAME"; secrets do not belong in source`},
				{File: "svc.json", Line: 2, Message: `field "channels.slack.agent": unknown agent "nobody": no folder agents/nobody with an AGENT.md`},
				{File: "svc.json", Line: 3, Message: `missing required field "channels.telegram.botToken" (an env: reference such as "env:NAME")`},
				{File: "svc.json", Line: 4, Message: `unknown field "channels.webhook.colour"`},
			}},
		{name: "valid optional parts", files: svc(`{"name": "t", "version": "1", "description": "d", "basePrompt": "p",
  "models": {"main": {"provider": "openai-compatible", "model": "m", "baseUrl": "http://127.0.0.1:8080/v1", "apiKey": "env:KEY_1", "effort": "low"},
             "alt": {"provider": "echo"}, "env": {"provider": "openai", "model": "m", "baseUrl": "env:OPENAI_BASE"}},
  "stores": {"backend": "postgres", "url": "env:DB_URL"}, "scope": {"requireScope": true},
  "ci": {"deploy": {"branches": ["main", "release/*", "v[0-9]*"]}},
  "channels": {"slack": {"signingSecret": "env:SLACK_SIGNING_SECRET", "botToken": "env:SLACK_BOT_TOKEN"},
    "telegram": {"secretToken": "env:TG_SECRET", "botToken": "env:TG_TOKEN"}, "webhook": {"secret": "env:HOOK", "replyUrl": "env:HOOK_URL"}}}`)},
	})
}

func TestConfigParsed(t *testing.T) {
	a, ps := problemsOf(t, baseTree(map[string]string{"svc.json": `{"name": "t", "version": "1",
  "models": {"main": {"provider": "openai-compatible", "model": "m", "baseUrl": "env:BASE", "apiKey": "env:KEY"}},
  "scope": {"requireScope": true}}`}))
	if ps != nil {
		t.Fatal(ps)
	}
	want := Config{
		Name: "t", Version: "1",
		Models: map[string]ModelRef{"main": {Provider: "openai-compatible", Model: "m", BaseURL: "env:BASE", APIKey: "env:KEY"}},
		Scope:  &ScopeConfig{RequireScope: true},
	}
	if diff := cmp.Diff(want, a.Config); diff != "" {
		t.Errorf("Config (-want +got):\n%s", diff)
	}
	if m, ok := a.MainModel(); !ok || m.APIKey != "env:KEY" {
		t.Errorf("MainModel() = %+v, %v; want the env: reference kept as written", m, ok)
	}
}

// TestDeployFilterOf reads ci.deploy the way Load reads svc.json (a byte order mark included)
// and tells which branches build.
func TestDeployFilterOf(t *testing.T) {
	read := func(svcJSON string) (*DeployFilter, error) {
		return DeployFilterOf(fstest.MapFS{"svc.json": {Data: []byte(svcJSON)}})
	}
	f, err := read("\ufeff{\"name\": \"t\", \"version\": \"1\", \"ci\": {\"deploy\": {\"branches\": [\"main\", \"release/*\"]}}}")
	if err != nil {
		t.Fatal(err)
	}
	for branch, want := range map[string]bool{"main": true, "release/1.2": true, "feature/x": false, "release": false} {
		if got := f.Allows(branch); got != want {
			t.Errorf("Allows(%q) = %v, want %v", branch, got, want)
		}
	}
	none, err := read(`{"name": "t", "version": "1"}`)
	if err != nil || none != nil || !none.Allows("anything") {
		t.Errorf("no ci.deploy = %+v, %v; want nil, allowing every branch", none, err)
	}
	if _, err := read(`{"name": `); err == nil || !strings.Contains(err.Error(), "svc.json:1") {
		t.Errorf("broken svc.json = %v, want an error naming the file and line", err)
	}
}
