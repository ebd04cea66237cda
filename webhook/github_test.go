package webhook_test

import (
	"net/http"
	"testing"

	"svc/webhook"
)

// githubRepo returns the repository of every GitHub fixture.
func githubRepo() webhook.Repo {
	return webhook.Repo{
		CloneURL: "https://github.com/Acme-Labs/support-agent.git",
		SSHURL:   "git@github.com:Acme-Labs/support-agent.git",
		WebURL:   "https://github.com/Acme-Labs/support-agent",
		FullName: "Acme-Labs/support-agent",
	}
}

func githubHeader(event string) http.Header {
	return headers(
		"X-GitHub-Event", event,
		"X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		"X-GitHub-Hook-ID", "468215973",
		"User-Agent", "GitHub-Hookshot/6b2f1a8",
		"Content-Type", "application/json",
	)
}

func TestParseGitHub(t *testing.T) {
	formHeader := githubHeader("push")
	formHeader.Set("Content-Type", "application/x-www-form-urlencoded")

	push := &webhook.Push{
		Host:        webhook.GitHub,
		Repository:  githubRepo(),
		Ref:         "refs/heads/main",
		Branch:      "main",
		Before:      "6113728f27ae82c7b1a177c8d03f9e96e0adf246",
		After:       "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c",
		Pusher:      "mira-dev",
		HeadMessage: "Tune the support prompt\n\nMention the refund tool in AGENT.md.",
	}
	runParseCases(t, webhook.GitHub, []parseCase{
		{name: "push", fixture: "push", header: githubHeader("push"), want: webhook.Event{Kind: webhook.KindPush, Push: push}},
		{
			name: "annotated tag builds the tagged commit", fixture: "push-tag", header: githubHeader("push"),
			want: webhook.Event{Kind: webhook.KindPush, Push: &webhook.Push{
				Host:        webhook.GitHub,
				Repository:  githubRepo(),
				Ref:         "refs/tags/v1.4.0",
				Tag:         "v1.4.0",
				Before:      webhook.ZeroSHA,
				After:       "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c",
				Pusher:      "mira-dev",
				HeadMessage: "Tune the support prompt\n\nMention the refund tool in AGENT.md.",
			}},
		},
		{
			name: "branch deletion", fixture: "push-delete", header: githubHeader("push"),
			want: webhook.Event{Kind: webhook.KindPush, Push: &webhook.Push{
				Host:       webhook.GitHub,
				Repository: githubRepo(),
				Ref:        "refs/heads/feature/refund-tool",
				Branch:     "feature/refund-tool",
				Before:     "7638417db6d59f3c431d3e1f261cc637155684cd",
				After:      webhook.ZeroSHA,
				Deleted:    true,
				Pusher:     "mira-dev",
			}},
		},
		{name: "ping", fixture: "ping", header: githubHeader("ping"), want: webhook.Event{Kind: webhook.KindPing}},
		{
			name: "create is ignored", fixture: "create", header: githubHeader("create"),
			want: webhook.Event{Kind: webhook.KindIgnored, Reason: `github event "create" is not a push`},
		},
		{
			name: "other events are ignored without reading the body", fixture: "ping", header: githubHeader("issues"),
			want: webhook.Event{Kind: webhook.KindIgnored, Reason: `github event "issues" is not a push`},
		},
		{name: "form-encoded push", fixture: "push (form)", body: formEncode(fixture(t, webhook.GitHub, "push")), header: formHeader, want: webhook.Event{Kind: webhook.KindPush, Push: push}},
	})
}

// TestParseGitHubVariants covers payload shapes built from the fixtures.
func TestParseGitHubVariants(t *testing.T) {
	h := githubHeader("push")
	tests := []struct {
		name  string
		body  string
		check func(t *testing.T, ev webhook.Event)
	}{
		{
			name: "after of zeros is a deletion even without deleted:true",
			body: mutate(t, webhook.GitHub, "push", map[string]any{"after": webhook.ZeroSHA, "head_commit": nil}),
			check: func(t *testing.T, ev webhook.Event) {
				if !ev.Push.Deleted || ev.Push.HeadMessage != "" {
					t.Errorf("Deleted = %v, HeadMessage = %q, want true, empty", ev.Push.Deleted, ev.Push.HeadMessage)
				}
			},
		},
		{
			name: "pull request refs are ignored",
			body: mutate(t, webhook.GitHub, "push", map[string]any{"ref": "refs/pull/12/head"}),
			check: func(t *testing.T, ev webhook.Event) {
				if ev.Kind != webhook.KindIgnored || ev.Reason != `github push to "refs/pull/12/head" is neither a branch nor a tag` {
					t.Errorf("got %+v, want ignored", ev)
				}
			},
		},
		{
			name: "SHA-256 repositories and upper-case hex",
			body: mutate(t, webhook.GitHub, "push", map[string]any{
				"after":       "ABCDEF0123456789abcdef0123456789ABCDEF0123456789abcdef0123456789",
				"head_commit": map[string]any{"id": "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789", "message": "m"},
			}),
			check: func(t *testing.T, ev webhook.Event) {
				if ev.Push.After != "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789" || ev.Push.HeadMessage != "m" {
					t.Errorf("After = %q, HeadMessage = %q", ev.Push.After, ev.Push.HeadMessage)
				}
			},
		},
		{
			name: "head commit other than after on a branch keeps after",
			body: mutate(t, webhook.GitHub, "push", map[string]any{"head_commit.id": "7638417db6d59f3c431d3e1f261cc637155684cd"}),
			check: func(t *testing.T, ev webhook.Event) {
				if ev.Push.After != "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c" || ev.Push.HeadMessage != "" {
					t.Errorf("After = %q, HeadMessage = %q", ev.Push.After, ev.Push.HeadMessage)
				}
			},
		},
		{
			name: "optional fields may be absent",
			body: mutate(t, webhook.GitHub, "push", map[string]any{
				"pusher": remove, "head_commit": remove, "repository.ssh_url": remove, "repository.html_url": remove,
			}),
			check: func(t *testing.T, ev webhook.Event) {
				want := webhook.Repo{CloneURL: githubRepo().CloneURL, FullName: githubRepo().FullName}
				if ev.Push.Repository != want || ev.Push.Pusher != "" {
					t.Errorf("Repository = %+v, Pusher = %q", ev.Push.Repository, ev.Push.Pusher)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := webhook.Parse(webhook.GitHub, h, []byte(tc.body))
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

func TestParseGitHubErrors(t *testing.T) {
	h := githubHeader("push")
	formHeader := githubHeader("push")
	formHeader.Set("Content-Type", "application/x-www-form-urlencoded")
	m := func(set map[string]any) string { return mutate(t, webhook.GitHub, "push", set) }
	runErrCases(t, webhook.GitHub, []errCase{
		{
			name: "no event header", header: headers("Content-Type", "application/json"), body: `{}`,
			wantErr: webhook.ErrUnsupportedEvent, wantMsg: "webhook: unsupported event: github request has no X-GitHub-Event header",
		},
		{
			name: "truncated JSON", header: h, body: `{"ref": "refs/heads/main"`,
			wantErr: webhook.ErrInvalidPayload, wantMsg: "webhook: github push: invalid JSON: unexpected end of JSON input",
		},
		{name: "empty body", header: h, body: ``, wantErr: webhook.ErrInvalidPayload},
		{
			name: "array body", header: h, body: `[]`,
			wantErr: webhook.ErrInvalidPayload, wantMsg: "webhook: github push: invalid JSON: body is array, want object",
		},
		{
			name: "missing after", header: h, body: m(map[string]any{"after": remove}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: github push: missing "after"`,
		},
		{
			name: "null after", header: h, body: m(map[string]any{"after": nil}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: github push: missing "after"`,
		},
		{
			name: "missing ref", header: h, body: m(map[string]any{"ref": remove}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: github push: missing "ref"`,
		},
		{
			name: "missing before", header: h, body: m(map[string]any{"before": remove}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: github push: missing "before"`,
		},
		{
			name: "missing repository", header: h, body: m(map[string]any{"repository": remove}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: github push: missing "repository"`,
		},
		{
			name: "missing clone url", header: h, body: m(map[string]any{"repository.clone_url": remove}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: github push: missing "repository.clone_url"`,
		},
		{
			name: "empty clone url", header: h, body: m(map[string]any{"repository.clone_url": " "}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: github push: invalid "repository.clone_url": is empty`,
		},
		{
			name: "missing full name", header: h, body: m(map[string]any{"repository.full_name": remove}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: github push: missing "repository.full_name"`,
		},
		{
			name: "after is a number", header: h, body: m(map[string]any{"after": 12}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: github push: invalid "after": want string, got number`,
		},
		{
			name: "clone url is an object", header: h, body: m(map[string]any{"repository.clone_url": map[string]any{}}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: github push: invalid "repository.clone_url": want string, got object`,
		},
		{
			name: "after is not a SHA", header: h, body: m(map[string]any{"after": "main"}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: github push: invalid "after": "main" is not a commit SHA`,
		},
		{
			name: "after is one hex digit short", header: h, body: m(map[string]any{"after": "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1"}),
			wantErr: webhook.ErrInvalidPayload,
		},
		{
			name: "after has a non-hex digit", header: h, body: m(map[string]any{"after": "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1g"}),
			wantErr: webhook.ErrInvalidPayload,
		},
		{
			name: "head commit id is not a SHA", header: h, body: m(map[string]any{"head_commit.id": "HEAD"}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: github push: invalid "head_commit.id": "HEAD" is not a commit SHA`,
		},
		{
			name: "ref outside refs/", header: h, body: m(map[string]any{"ref": "main"}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: github push: invalid "ref": "main" does not start with refs/`,
		},
		{
			name: "ref with a space", header: h, body: m(map[string]any{"ref": "refs/heads/my branch"}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: github push: invalid "ref": "refs/heads/my branch" has forbidden character ' '`,
		},
		{
			name: "ref with dot dot", header: h, body: m(map[string]any{"ref": "refs/heads/../../etc"}),
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: github push: invalid "ref": "refs/heads/../../etc" has a forbidden sequence`,
		},
		{
			name: "form without payload", header: formHeader, body: "x=1",
			wantErr: webhook.ErrInvalidPayload, wantMsg: `webhook: github push: missing "payload"`,
		},
		{
			name: "ping with invalid JSON", header: githubHeader("ping"), body: `{"zen":`,
			wantErr: webhook.ErrInvalidPayload, wantMsg: "webhook: github ping: invalid JSON: unexpected end of JSON input",
		},
	})
}

// TestParseGitHubRefNames checks the git check-ref-format rules one by one.
func TestParseGitHubRefNames(t *testing.T) {
	h := githubHeader("push")
	tests := []struct {
		ref    string
		wantOK bool
	}{
		{"refs/heads/main", true},
		{"refs/heads/feature/a-b_c.d", true},
		{"refs/heads/ünïcode", true},
		{"refs/tags/v1.0.0", true},
		{"refs/heads/a.lock", false},
		{"refs/heads/a.lock/b", false},
		{"refs/heads/.hidden", false},
		{"refs/heads/a/", false},
		{"refs/heads/a.", false},
		{"refs/heads//a", false},
		{"refs/heads/a@{1}", false},
		{"refs/heads/a~1", false},
		{"refs/heads/a^", false},
		{"refs/heads/a:b", false},
		{"refs/heads/a?", false},
		{"refs/heads/a*", false},
		{"refs/heads/a[b", false},
		{"refs/heads/a\\b", false},
		{"refs/heads/a\tb", false},
		{"refs/heads/a\x7fb", false},
		{"", false},
	}
	for _, tc := range tests {
		body := mutate(t, webhook.GitHub, "push", map[string]any{"ref": tc.ref})
		_, err := webhook.Parse(webhook.GitHub, h, []byte(body))
		if (err == nil) != tc.wantOK {
			t.Errorf("Parse(ref %q) error = %v, want ok %v", tc.ref, err, tc.wantOK)
		}
	}
}

// BenchmarkParseGitHubPush measures Parse on the GitHub push fixture.
func BenchmarkParseGitHubPush(b *testing.B) {
	body := fixture(b, webhook.GitHub, "push")
	h := githubHeader("push")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := webhook.Parse(webhook.GitHub, h, body); err != nil {
			b.Fatal(err)
		}
	}
}
