package webhook_test

import (
	"net/http"
	"strings"
	"testing"

	"svc/webhook"
)

// gitlabRepo returns the repository of every GitLab fixture (in a subgroup).
func gitlabRepo() webhook.Repo {
	return webhook.Repo{
		CloneURL: "https://gitlab.com/acme-labs/agents/support-agent.git",
		SSHURL:   "git@gitlab.com:acme-labs/agents/support-agent.git",
		WebURL:   "https://gitlab.com/acme-labs/agents/support-agent",
		FullName: "acme-labs/agents/support-agent",
	}
}

func gitlabHeader(event string) http.Header {
	return headers(
		"X-Gitlab-Event", event,
		"X-Gitlab-Instance", "https://gitlab.com",
		"X-Gitlab-Webhook-UUID", "6c8f2a1e-3b5d-4e7f-9a0b-1c2d3e4f5a6b",
		"X-Gitlab-Event-UUID", "0e9d8c7b-6a5f-4e3d-2c1b-0a9f8e7d6c5b",
		"User-Agent", "GitLab/16.10.0-pre",
		"Content-Type", "application/json",
	)
}

func TestParseGitLab(t *testing.T) {
	push := &webhook.Push{
		Host:        webhook.GitLab,
		Repository:  gitlabRepo(),
		Ref:         "refs/heads/main",
		Branch:      "main",
		Before:      "2e4c6a8b0d2f4e6a8c0b2d4f6a8c0e2b4d6f8a0c",
		After:       "c7e5a3b1d9f2e4c6a8b0d2f4e6a8c0b2d4f6a8c1",
		Pusher:      "mira.okafor",
		HeadMessage: "Route billing questions to the escalation skill\n\nCloses #12\n",
	}
	runParseCases(t, webhook.GitLab, []parseCase{
		{name: "push", fixture: "push", header: gitlabHeader("Push Hook"), want: webhook.Event{Kind: webhook.KindPush, Push: push}},
		{
			name: "annotated tag builds checkout_sha", fixture: "push-tag", header: gitlabHeader("Tag Push Hook"),
			want: webhook.Event{Kind: webhook.KindPush, Push: &webhook.Push{
				Host:        webhook.GitLab,
				Repository:  gitlabRepo(),
				Ref:         "refs/tags/v3.1.0",
				Tag:         "v3.1.0",
				Before:      webhook.ZeroSHA,
				After:       "c7e5a3b1d9f2e4c6a8b0d2f4e6a8c0b2d4f6a8c1",
				Pusher:      "mira.okafor",
				HeadMessage: "Route billing questions to the escalation skill\n\nCloses #12\n",
			}},
		},
		{
			name: "branch deletion", fixture: "push-delete", header: gitlabHeader("Push Hook"),
			want: webhook.Event{Kind: webhook.KindPush, Push: &webhook.Push{
				Host:       webhook.GitLab,
				Repository: gitlabRepo(),
				Ref:        "refs/heads/feature/escalation",
				Branch:     "feature/escalation",
				Before:     "9b1f3e5d7c2a4b6d8e0f1a3c5e7b9d2f4a6c8e01",
				After:      webhook.ZeroSHA,
				Deleted:    true,
				Pusher:     "mira.okafor",
			}},
		},
		{name: "system hook push", fixture: "system-push", header: gitlabHeader("System Hook"), want: webhook.Event{Kind: webhook.KindPush, Push: push}},
		{
			name: "system hook of another kind is ignored", fixture: "system-repository-update", header: gitlabHeader("System Hook"),
			want: webhook.Event{Kind: webhook.KindIgnored, Reason: `gitlab system hook "repository_update" is not a push`},
		},
		{
			name: "merge request hook is ignored", fixture: "push", header: gitlabHeader("Merge Request Hook"),
			want: webhook.Event{Kind: webhook.KindIgnored, Reason: `gitlab event "Merge Request Hook" is not a push`},
		},
		{
			// GitLab's test button has sent branch bodies for tag push
			// hooks; the ref decides.
			name: "tag push hook with a branch body", fixture: "push", header: gitlabHeader("Tag Push Hook"),
			want: webhook.Event{Kind: webhook.KindPush, Push: push},
		},
	})
}

func TestParseGitLabVariants(t *testing.T) {
	tests := []struct {
		name   string
		header http.Header
		body   string
		check  func(t *testing.T, ev webhook.Event)
	}{
		{
			name:   "system hook with event_name only",
			header: gitlabHeader("System Hook"),
			body:   mutate(t, webhook.GitLab, "system-push", map[string]any{"object_kind": remove}),
			check: func(t *testing.T, ev webhook.Event) {
				if ev.Kind != webhook.KindPush || ev.Push.Branch != "main" {
					t.Errorf("got %+v", ev)
				}
			},
		},
		{
			name:   "system hook tag push",
			header: gitlabHeader("System Hook"),
			body:   mutate(t, webhook.GitLab, "push-tag", nil),
			check: func(t *testing.T, ev webhook.Event) {
				if ev.Kind != webhook.KindPush || ev.Push.Tag != "v3.1.0" {
					t.Errorf("got %+v", ev)
				}
			},
		},
		{
			name:   "null checkout_sha falls back to after",
			header: gitlabHeader("Push Hook"),
			body:   mutate(t, webhook.GitLab, "push", map[string]any{"checkout_sha": nil}),
			check: func(t *testing.T, ev webhook.Event) {
				if ev.Push.After != "c7e5a3b1d9f2e4c6a8b0d2f4e6a8c0b2d4f6a8c1" {
					t.Errorf("After = %q", ev.Push.After)
				}
			},
		},
		{
			name:   "pusher falls back to user_name",
			header: gitlabHeader("Push Hook"),
			body:   mutate(t, webhook.GitLab, "push", map[string]any{"user_username": remove}),
			check: func(t *testing.T, ev webhook.Event) {
				if ev.Push.Pusher != "Mira Okafor" {
					t.Errorf("Pusher = %q", ev.Push.Pusher)
				}
			},
		},
		{
			name:   "tag deletion",
			header: gitlabHeader("Tag Push Hook"),
			body:   mutate(t, webhook.GitLab, "push-tag", map[string]any{"after": webhook.ZeroSHA, "checkout_sha": nil, "commits": []any{}}),
			check: func(t *testing.T, ev webhook.Event) {
				if !ev.Push.Deleted || ev.Push.Tag != "v3.1.0" || ev.Push.HeadMessage != "" {
					t.Errorf("got %+v", ev.Push)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := webhook.Parse(webhook.GitLab, tc.header, []byte(tc.body))
			if err != nil {
				t.Fatalf("Parse() error: %v", err)
			}
			if ev.Kind == webhook.KindPush {
				checkPushInvariants(t, ev.Push)
			}
			tc.check(t, ev)
		})
	}
}

func TestParseGitLabErrors(t *testing.T) {
	h := gitlabHeader("Push Hook")
	m := func(set map[string]any) string { return mutate(t, webhook.GitLab, "push", set) }
	runErrCases(t, webhook.GitLab, []errCase{
		{
			name: "no event header", header: headers("Content-Type", "application/json"), body: `{}`,
			wantErr: webhook.ErrUnsupportedEvent, wantMsg: "webhook: unsupported event: gitlab request has no X-Gitlab-Event header",
		},
		{
			name: "invalid JSON", header: h, body: `{`,
			wantErr: webhook.ErrInvalidPayload, wantMsg: "webhook: gitlab push: invalid JSON: unexpected end of JSON input",
		},
		{
			name: "missing after", header: h, body: m(map[string]any{"after": remove}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitlab push: missing "after"`,
		},
		{
			name: "missing before", header: h, body: m(map[string]any{"before": remove}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitlab push: missing "before"`,
		},
		{
			name: "missing ref", header: gitlabHeader("Tag Push Hook"), body: mutate(t, webhook.GitLab, "push-tag", map[string]any{"ref": remove}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitlab tag push: missing "ref"`,
		},
		{
			name: "missing project", header: h, body: m(map[string]any{"project": remove}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitlab push: missing "project"`,
		},
		{
			name: "missing git_http_url", header: h, body: m(map[string]any{"project.git_http_url": remove}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitlab push: missing "project.git_http_url"`,
		},
		{
			name: "empty git_http_url", header: h, body: m(map[string]any{"project.git_http_url": ""}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitlab push: invalid "project.git_http_url": is empty`,
		},
		{
			name: "missing path_with_namespace", header: h, body: m(map[string]any{"project.path_with_namespace": remove}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitlab push: missing "project.path_with_namespace"`,
		},
		{
			name: "checkout_sha is not a SHA", header: h, body: m(map[string]any{"checkout_sha": "main"}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitlab push: invalid "checkout_sha": "main" is not a commit SHA`,
		},
		{
			name: "project is a string", header: h, body: m(map[string]any{"project": "acme"}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitlab push: invalid "project": want object, got string`,
		},
		{
			name: "system hook without a kind", header: gitlabHeader("System Hook"),
			body:    mutate(t, webhook.GitLab, "system-push", map[string]any{"object_kind": remove, "event_name": remove}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitlab system hook: missing "object_kind"`,
		},
		{
			name: "system hook with invalid JSON", header: gitlabHeader("System Hook"), body: `[1]`,
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitlab system hook: invalid JSON: body is array, want object`,
		},
		{
			name: "system hook push without after", header: gitlabHeader("System Hook"),
			body:    mutate(t, webhook.GitLab, "system-push", map[string]any{"after": remove}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitlab system hook push: missing "after"`,
		},
		{
			// Long values are shortened in messages.
			name: "long ref", header: h, body: m(map[string]any{"ref": strings.Repeat("é", 60)}),
			wantErr: webhook.ErrInvalidPayload,
			wantMsg: `webhook: gitlab push: invalid "ref": "` + strings.Repeat("é", 40) + `…" does not start with refs/`,
		},
	})
}
