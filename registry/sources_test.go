package registry_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"gorm.io/gorm"

	"svc/migrations/dbtest"
	"svc/registry"
	"svc/webhook"
)

func TestSources(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s := registry.NewSources(db, testCipher(t, 3), webhook.NormalizeRepoURL)
		a := mustCreateAgent(t, db, "one")
		b := mustCreateAgent(t, db, "two")

		if _, err := s.Get(ctx, a.ID); !errors.Is(err, registry.ErrSourceNotFound) {
			t.Fatalf("Get before Put = %v, want ErrSourceNotFound", err)
		}
		src, err := s.Put(ctx, a.ID, registry.SourceSpec{
			Type: registry.SourceGit, URL: "https://github.com/Acme/Repo.git", WebhookSecret: "whsec-123", Credentials: "env:GIT_TOKEN",
		})
		if err != nil {
			t.Fatal(err)
		}
		if src.DefaultBranch != "main" || src.NormalizedURL != "github.com/Acme/Repo" || src.WebhookSecret != "whsec-123" {
			t.Errorf("Put = %+v", src)
		}
		var raw []byte
		if err := db.Raw("SELECT webhook_secret FROM sources WHERE agent_id = ?", a.ID).Row().Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if len(raw) == 0 || bytes.Contains(raw, []byte("whsec-123")) {
			t.Errorf("stored webhook secret = %q, want sealed bytes", raw)
		}
		got, err := s.Get(ctx, a.ID)
		if err != nil || got.WebhookSecret != "whsec-123" || got.URL != src.URL || got.Credentials != "env:GIT_TOKEN" {
			t.Errorf("Get = %+v, %v", got, err)
		}
		if _, err := s.Put(ctx, b.ID, registry.SourceSpec{Type: registry.SourceGit, URL: "git@github.com:acme/other.git", DefaultBranch: "develop"}); err != nil {
			t.Fatal(err)
		}
		// Hosts and (on GitHub, GitLab, Gitea) paths are case-insensitive.
		for _, u := range []string{"git@github.com:Acme/Repo.git", "https://github.com/Acme/Repo", "ssh://git@github.com:22/Acme/Repo/", "https://github.com/acme/repo", "https://GITHUB.COM/ACME/REPO.git/"} {
			found, err := s.FindByRepoURL(ctx, u)
			if err != nil || len(found) != 1 || found[0].AgentID != a.ID || found[0].WebhookSecret != "whsec-123" {
				t.Errorf("FindByRepoURL(%q) = %+v, %v; want agent %s", u, found, err, a.ID)
			}
		}
		for _, u := range []string{"https://github.com/acme/repo2", "https://gitlab.com/Acme/Repo", "", "file:///tmp/x"} {
			if found, err := s.FindByRepoURL(ctx, u); err != nil || len(found) != 0 {
				t.Errorf("FindByRepoURL(%q) = %+v, %v; want none", u, found, err)
			}
		}
		// Replacing with hosted clears everything; the repository no longer matches.
		h, err := s.Put(ctx, a.ID, registry.SourceSpec{Type: registry.SourceHosted})
		if err != nil || h.Type != registry.SourceHosted || h.URL != "" || h.WebhookSecret != "" || h.DefaultBranch != "" {
			t.Errorf("Put hosted = %+v, %v", h, err)
		}
		if found, _ := s.FindByRepoURL(ctx, "https://github.com/Acme/Repo"); len(found) != 0 {
			t.Errorf("FindByRepoURL after switching to hosted = %+v, want none", found)
		}
		if _, err := s.Put(ctx, "anosuchagent", registry.SourceSpec{Type: registry.SourceHosted}); !errors.Is(err, registry.ErrAgentNotFound) {
			t.Errorf("Put for a missing agent = %v, want ErrAgentNotFound", err)
		}
		// A local path or file URL is accepted (the embedded server) but matches no webhook.
		l, err := s.Put(ctx, b.ID, registry.SourceSpec{Type: registry.SourceGit, URL: "file:///srv/repo"})
		if err != nil || l.NormalizedURL != "" {
			t.Errorf("Put file URL = %+v, %v", l, err)
		}
	})
}

func TestSourceSpecValidation(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		s := registry.NewSources(db, testCipher(t, 3), webhook.NormalizeRepoURL)
		a := mustCreateAgent(t, db, "one")
		git := func(mod func(*registry.SourceSpec)) registry.SourceSpec {
			spec := registry.SourceSpec{Type: registry.SourceGit, URL: "https://example.com/a/b.git"}
			mod(&spec)
			return spec
		}
		tests := []struct {
			name  string
			spec  registry.SourceSpec
			field string
		}{
			{"no type", registry.SourceSpec{}, "type"},
			{"bad type", registry.SourceSpec{Type: "svn"}, "type"},
			{"hosted with url", registry.SourceSpec{Type: registry.SourceHosted, URL: "https://x/y"}, "url"},
			{"hosted with secret", registry.SourceSpec{Type: registry.SourceHosted, WebhookSecret: "s"}, "webhookSecret"},
			{"git without url", git(func(s *registry.SourceSpec) { s.URL = "" }), "url"},
			{"password in url", git(func(s *registry.SourceSpec) { s.URL = "https://me:tok@example.com/a/b" }), "url"},
			{"bad scheme", git(func(s *registry.SourceSpec) { s.URL = "ftp://example.com/a" }), "url"},
			{"space in url", git(func(s *registry.SourceSpec) { s.URL = "https://example.com/a b" }), "url"},
			{"option-like url", git(func(s *registry.SourceSpec) { s.URL = "--upload-pack=x" }), "url"},
			{"relative path", git(func(s *registry.SourceSpec) { s.URL = "repo" }), "url"},
			{"long url", git(func(s *registry.SourceSpec) {
				s.URL = "https://example.com/" + strings.Repeat("a", registry.MaxSourceURLLen)
			}), "url"},
			{"bad branch", git(func(s *registry.SourceSpec) { s.DefaultBranch = "a..b" }), "defaultBranch"},
			{"credentials not env", git(func(s *registry.SourceSpec) { s.Credentials = "ghp_plaintoken" }), "credentials"},
			{"long webhook secret", git(func(s *registry.SourceSpec) { s.WebhookSecret = strings.Repeat("s", registry.MaxWebhookSecretLen+1) }), "webhookSecret"},
		}
		for _, tt := range tests {
			_, err := s.Put(context.Background(), a.ID, tt.spec)
			var ie *registry.InvalidError
			if !errors.As(err, &ie) || ie.Field != tt.field {
				t.Errorf("%s: Put = %v, want an InvalidError for %s", tt.name, err, tt.field)
			}
		}
		if _, err := s.Put(context.Background(), a.ID, git(func(s *registry.SourceSpec) {
			s.WebhookSecret = strings.Repeat("s", registry.MaxWebhookSecretLen)
		})); err != nil {
			t.Errorf("webhook secret at the limit: %v", err)
		}
	})
}

func TestValidateBranch(t *testing.T) {
	for name, ok := range map[string]bool{
		"main": true, "release/1.2": true, "feature/x-y_z": true,
		"": false, "-x": false, "a b": false, "a..b": false, "a/": false, "/a": false, "a.lock": false, "a~1": false, "a:b": false, "@": false, "a//b": false,
	} {
		if err := registry.ValidateBranch("branch", name); (err == nil) != ok {
			t.Errorf("ValidateBranch(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

// TestFindByRepoURLIgnoresCase checks the URLs of issue 16: a push from https://GitHub.com/Acme/Widget
// finds the agent whose source is https://github.com/acme/widget.git, and the other way round
// (a source stored before matching ignored case keeps its spelling in the table).
func TestFindByRepoURLIgnoresCase(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s := registry.NewSources(db, testCipher(t, 3), webhook.NormalizeRepoURL)
		lower := mustCreateAgent(t, db, "lower")
		mixed := mustCreateAgent(t, db, "mixed")
		if _, err := s.Put(ctx, lower.ID, registry.SourceSpec{Type: registry.SourceGit, URL: "https://github.com/acme/widget.git"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Put(ctx, mixed.ID, registry.SourceSpec{Type: registry.SourceGit, URL: "https://GitHub.com/Acme/Gadget"}); err != nil {
			t.Fatal(err)
		}
		for u, want := range map[string]string{
			"https://GitHub.com/Acme/Widget":     lower.ID,
			"git@GitHub.com:Acme/Widget.git":     lower.ID,
			"https://github.com/acme/gadget.git": mixed.ID,
			"http://github.com/ACME/GADGET/":     mixed.ID, // the scheme never counted
		} {
			found, err := s.FindByRepoURL(ctx, u)
			if err != nil || len(found) != 1 || found[0].AgentID != want {
				t.Errorf("FindByRepoURL(%q) = %+v, %v; want agent %s", u, found, err, want)
			}
		}
		if found, err := s.FindByRepoURL(ctx, "https://github.com/acme/widgets"); err != nil || len(found) != 0 {
			t.Errorf("FindByRepoURL(another repository) = %+v, %v; want none", found, err)
		}
	})
}
