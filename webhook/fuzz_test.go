package webhook_test

import (
	"errors"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"testing"

	"svc/webhook"
)

// eventHeader names the header carrying the event for each host.
func eventHeader(host webhook.Host) (string, bool) {
	switch host {
	case webhook.GitHub:
		return "X-GitHub-Event", true
	case webhook.Gitea:
		return "X-Gitea-Event", true
	case webhook.GitLab:
		return "X-Gitlab-Event", true
	}
	return "", false
}

// fixtureEvent returns the event header value a host sends with a fixture.
func fixtureEvent(host webhook.Host, name string) string {
	switch {
	case host == webhook.GitLab && name == "push-tag":
		return "Tag Push Hook"
	case host == webhook.GitLab && strings.HasPrefix(name, "system-"):
		return "System Hook"
	case host == webhook.GitLab:
		return "Push Hook"
	case strings.HasPrefix(name, "push"):
		return "push"
	}
	return name // ping, create, delete
}

// FuzzParse feeds Parse and Verify arbitrary deliveries, seeded with every
// fixture. Parse must not panic, must fail only with the documented errors
// and every push it returns must be well formed; Verify must accept a body
// signed with the secret.
func FuzzParse(f *testing.F) {
	err := fs.WalkDir(fixtures, "testdata", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		host := webhook.Host(path.Base(path.Dir(p)))
		name := strings.TrimSuffix(path.Base(p), ".json")
		body, err := fixtures.ReadFile(p)
		if err != nil {
			return err
		}
		f.Add(string(host), fixtureEvent(host, name), false, body)
		return nil
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("github", "push", true, formEncode(fixture(f, webhook.GitHub, "push")))
	f.Add("gitea", "push", false, []byte(`{"ref":"refs/heads/a","before":"","after":null}`))
	f.Add("gitlab", "System Hook", false, []byte(`{"object_kind":"tag_push"}`))
	f.Add("github", "push", false, []byte(`null`))

	f.Fuzz(func(t *testing.T, hostName, event string, form bool, body []byte) {
		host := webhook.Host(hostName)
		h := http.Header{}
		if name, ok := eventHeader(host); ok {
			h.Set(name, event)
		}
		if form {
			h.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		ev, err := webhook.Parse(host, h, body)
		if err != nil {
			if !errors.Is(err, webhook.ErrInvalidPayload) && !errors.Is(err, webhook.ErrUnsupportedEvent) &&
				!errors.Is(err, webhook.ErrUnsupportedHost) && !errors.Is(err, webhook.ErrPayloadTooLarge) {
				t.Fatalf("Parse() error %v is not a documented error", err)
			}
			if ev != (webhook.Event{}) {
				t.Fatalf("Parse() = %+v with error %v, want zero Event", ev, err)
			}
		} else {
			switch ev.Kind {
			case webhook.KindPush:
				checkPushInvariants(t, ev.Push)
				if ev.Push.Host != host {
					t.Errorf("Push.Host = %q, want %q", ev.Push.Host, host)
				}
			case webhook.KindPing, webhook.KindIgnored:
				if ev.Push != nil {
					t.Errorf("%s event with a Push", ev.Kind)
				}
			default:
				t.Fatalf("Parse() Kind = %q", ev.Kind)
			}
		}

		if host == webhook.GitHub || host == webhook.Gitea {
			sig := sign(testSecret, body)
			vh := headers("X-Hub-Signature-256", "sha256="+sig, "X-Gitea-Signature", sig)
			if err := webhook.Verify(host, vh, body, testSecret); err != nil {
				t.Fatalf("Verify(signed body) = %v", err)
			}
		}
	})
}

// FuzzNormalizeRepoURL checks that normalising never panics and is stable.
func FuzzNormalizeRepoURL(f *testing.F) {
	for _, s := range []string{
		"https://github.com/Acme/Repo.git", "git@github.com:Acme/Repo.git", "ssh://git@github.com:22/Acme/Repo/",
		"ssh://git@[::1]:2222/a/b.git", "github.com/a/b", "file:///x", "a@b@c:d/e.git.git", "h/x://y",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		once := webhook.NormalizeRepoURL(u)
		if twice := webhook.NormalizeRepoURL(once); twice != once {
			t.Fatalf("NormalizeRepoURL(%q) = %q, but NormalizeRepoURL(%q) = %q", u, once, once, twice)
		}
		// The host may end in ".git"; a path may not.
		if _, path, ok := strings.Cut(once, "/"); ok && (path == "" || strings.HasSuffix(path, "/") || strings.HasSuffix(path, ".git")) {
			t.Fatalf("NormalizeRepoURL(%q) = %q keeps a trailing / or .git", u, once)
		}
	})
}
