package webhook_test

import (
	"net/http"
	"testing"

	"svc/webhook"
)

// giteaRepo returns the repository of every Gitea fixture (SSH on port 2222).
func giteaRepo() webhook.Repo {
	return webhook.Repo{
		CloneURL: "https://git.acme-labs.example/acme/support-agent.git",
		SSHURL:   "ssh://git@git.acme-labs.example:2222/acme/support-agent.git",
		WebURL:   "https://git.acme-labs.example/acme/support-agent",
		FullName: "acme/support-agent",
	}
}

// giteaHeader is what Gitea sends: its own headers plus GitHub/Gogs copies.
func giteaHeader(event string) http.Header {
	return headers(
		"X-Gitea-Event", event,
		"X-Gitea-Event-Type", event,
		"X-Gitea-Delivery", "f6266f16-1bf3-46a5-9ea4-602e06ead473",
		"X-Gogs-Event", event,
		"X-GitHub-Event", event,
		"Content-Type", "application/json",
	)
}

// forgejoHeader is what Forgejo sends when it no longer copies the Gitea headers.
func forgejoHeader(event string) http.Header {
	return headers(
		"X-Forgejo-Event", event,
		"X-Forgejo-Event-Type", event,
		"X-Forgejo-Delivery", "0b5d8c3e-7a21-4f6e-9c1d-2e3f4a5b6c7d",
		"Content-Type", "application/json",
	)
}

func TestParseGitea(t *testing.T) {
	push := &webhook.Push{
		Host:        webhook.Gitea,
		Repository:  giteaRepo(),
		Ref:         "refs/heads/main",
		Branch:      "main",
		Before:      "e1d2c3b4a5f60718293a4b5c6d7e8f9012345678",
		After:       "a4b8c2d6e0f1a3b5c7d9e1f2a4b6c8d0e2f4a6b8",
		Pusher:      "mira",
		HeadMessage: "Describe order status in AGENT.md\n",
	}
	formHeader := giteaHeader("push")
	formHeader.Set("Content-Type", "application/x-www-form-urlencoded")
	runParseCases(t, webhook.Gitea, []parseCase{
		{name: "push", fixture: "push", header: giteaHeader("push"), want: webhook.Event{Kind: webhook.KindPush, Push: push}},
		{name: "forgejo push", fixture: "push", header: forgejoHeader("push"), want: webhook.Event{Kind: webhook.KindPush, Push: push}},
		{name: "form-encoded push", fixture: "push (form)", body: formEncode(fixture(t, webhook.Gitea, "push")), header: formHeader, want: webhook.Event{Kind: webhook.KindPush, Push: push}},
		{
			name: "annotated tag builds the tagged commit", fixture: "push-tag", header: giteaHeader("push"),
			want: webhook.Event{Kind: webhook.KindPush, Push: &webhook.Push{
				Host:        webhook.Gitea,
				Repository:  giteaRepo(),
				Ref:         "refs/tags/v2.0.1",
				Tag:         "v2.0.1",
				Before:      webhook.ZeroSHA,
				After:       "a4b8c2d6e0f1a3b5c7d9e1f2a4b6c8d0e2f4a6b8",
				Pusher:      "mira",
				HeadMessage: "Describe order status in AGENT.md\n",
			}},
		},
		{
			name: "tag deletion comes as a push", fixture: "push-delete", header: giteaHeader("push"),
			want: webhook.Event{Kind: webhook.KindPush, Push: &webhook.Push{
				Host:       webhook.Gitea,
				Repository: giteaRepo(),
				Ref:        "refs/tags/v2.0.0",
				Tag:        "v2.0.0",
				Before:     "5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f80",
				After:      webhook.ZeroSHA,
				Deleted:    true,
				Pusher:     "mira",
			}},
		},
		{
			name: "branch deletion comes as a delete event", fixture: "delete", header: giteaHeader("delete"),
			want: webhook.Event{Kind: webhook.KindPush, Push: &webhook.Push{
				Host:       webhook.Gitea,
				Repository: giteaRepo(),
				Ref:        "refs/heads/feature/order-status",
				Branch:     "feature/order-status",
				After:      webhook.ZeroSHA,
				Deleted:    true,
				Pusher:     "mira",
			}},
		},
		{
			name: "create is ignored", fixture: "create", header: giteaHeader("create"),
			want: webhook.Event{Kind: webhook.KindIgnored, Reason: `gitea event "create" is not a push`},
		},
		{
			name: "forgejo pull request is ignored", fixture: "create", header: forgejoHeader("pull_request"),
			want: webhook.Event{Kind: webhook.KindIgnored, Reason: `gitea event "pull_request" is not a push`},
		},
		{
			// Gitea's test delivery is a push; a ping is accepted in case
			// a version or fork sends one.
			name: "ping", fixture: "create", header: giteaHeader("ping"), want: webhook.Event{Kind: webhook.KindPing},
		},
	})
}

func TestParseGiteaVariants(t *testing.T) {
	tests := []struct {
		name   string
		header http.Header
		body   string
		check  func(t *testing.T, ev webhook.Event)
	}{
		{
			name:   "without head_commit the message comes from the commit list",
			header: giteaHeader("push"),
			body:   mutate(t, webhook.Gitea, "push", map[string]any{"head_commit": remove}),
			check: func(t *testing.T, ev webhook.Event) {
				if ev.Push.HeadMessage != "Describe order status in AGENT.md\n" {
					t.Errorf("HeadMessage = %q", ev.Push.HeadMessage)
				}
			},
		},
		{
			name:   "pusher without login uses username",
			header: giteaHeader("push"),
			body:   mutate(t, webhook.Gitea, "push", map[string]any{"pusher.login": remove}),
			check: func(t *testing.T, ev webhook.Event) {
				if ev.Push.Pusher != "mira" {
					t.Errorf("Pusher = %q", ev.Push.Pusher)
				}
			},
		},
		{
			name:   "tag delete event",
			header: giteaHeader("delete"),
			body:   mutate(t, webhook.Gitea, "delete", map[string]any{"ref": "v2.0.0", "ref_type": "tag"}),
			check: func(t *testing.T, ev webhook.Event) {
				if ev.Push.Tag != "v2.0.0" || ev.Push.Ref != "refs/tags/v2.0.0" || !ev.Push.Deleted {
					t.Errorf("got %+v", ev.Push)
				}
			},
		},
		{
			name:   "delete event with a full ref",
			header: giteaHeader("delete"),
			body:   mutate(t, webhook.Gitea, "delete", map[string]any{"ref": "refs/heads/feature/order-status"}),
			check: func(t *testing.T, ev webhook.Event) {
				if ev.Push.Branch != "feature/order-status" {
					t.Errorf("got %+v", ev.Push)
				}
			},
		},
		{
			name:   "X-Gitea-Event wins over X-Forgejo-Event",
			header: func() http.Header { h := giteaHeader("push"); h.Set("X-Forgejo-Event", "issues"); return h }(),
			body:   string(fixture(t, webhook.Gitea, "push")),
			check: func(t *testing.T, ev webhook.Event) {
				if ev.Kind != webhook.KindPush {
					t.Errorf("Kind = %q, want push", ev.Kind)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := webhook.Parse(webhook.Gitea, tc.header, []byte(tc.body))
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

func TestParseGiteaErrors(t *testing.T) {
	h := giteaHeader("push")
	m := func(set map[string]any) string { return mutate(t, webhook.Gitea, "push", set) }
	d := func(set map[string]any) string { return mutate(t, webhook.Gitea, "delete", set) }
	runErrCases(t, webhook.Gitea, []errCase{
		{
			name: "no event header", header: headers("X-GitHub-Event", "push"), body: `{}`,
			wantErr: webhook.ErrUnsupportedEvent, wantMsg: "webhook: unsupported event: gitea request has no X-Gitea-Event or X-Forgejo-Event header",
		},
		{
			name: "invalid JSON", header: h, body: `{"ref":}`,
			wantErr: webhook.ErrInvalidPayload, wantMsg: "webhook: gitea push: invalid JSON: invalid character '}' looking for beginning of value",
		},
		{
			name: "missing after", header: h, body: m(map[string]any{"after": remove}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitea push: missing "after"`,
		},
		{
			name: "missing before", header: h, body: m(map[string]any{"before": remove}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitea push: missing "before"`,
		},
		{
			name: "missing ref", header: h, body: m(map[string]any{"ref": remove}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitea push: missing "ref"`,
		},
		{
			name: "missing repository", header: h, body: m(map[string]any{"repository": remove}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitea push: missing "repository"`,
		},
		{
			name: "missing clone url", header: h, body: m(map[string]any{"repository.clone_url": remove}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitea push: missing "repository.clone_url"`,
		},
		{
			name: "empty full name", header: h, body: m(map[string]any{"repository.full_name": ""}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitea push: invalid "repository.full_name": is empty`,
		},
		{
			name: "missing full name", header: h, body: m(map[string]any{"repository.full_name": remove}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitea push: missing "repository.full_name"`,
		},
		{
			name: "commits is an object", header: h, body: m(map[string]any{"commits": map[string]any{}}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitea push: invalid "commits": want array, got object`,
		},
		{
			name: "head commit id is not a SHA", header: h, body: m(map[string]any{"head_commit.id": ""}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitea push: invalid "head_commit.id": "" is not a commit SHA`,
		},
		{
			name: "delete without ref", header: giteaHeader("delete"), body: d(map[string]any{"ref": remove}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitea delete: missing "ref"`,
		},
		{
			name: "delete without ref_type", header: giteaHeader("delete"), body: d(map[string]any{"ref_type": remove}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitea delete: missing "ref_type"`,
		},
		{
			name: "delete of an unknown ref type", header: giteaHeader("delete"), body: d(map[string]any{"ref_type": "note"}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitea delete: invalid "ref_type": want "branch" or "tag", got "note"`,
		},
		{
			name: "delete of a bad ref", header: giteaHeader("delete"), body: d(map[string]any{"ref": "a..b"}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitea delete: invalid "ref": "refs/heads/a..b" has a forbidden sequence`,
		},
		{
			name: "delete without repository", header: giteaHeader("delete"), body: d(map[string]any{"repository": remove}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: gitea delete: missing "repository"`,
		},
		{
			name: "ping with invalid JSON", header: giteaHeader("ping"), body: `nope`,
			wantErr: webhook.ErrInvalidPayload,
		},
	})
}
