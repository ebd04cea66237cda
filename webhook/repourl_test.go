package webhook_test

import (
	"slices"
	"testing"

	"svc/webhook"
)

func TestNormalizeRepoURL(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		// The three forms the brief names normalise equal.
		{"https://github.com/Acme/Repo.git", "github.com/Acme/Repo"},
		{"git@github.com:Acme/Repo.git", "github.com/Acme/Repo"},
		{"ssh://git@github.com/Acme/Repo", "github.com/Acme/Repo"},
		// Host case folds, path case stays.
		{"https://GitHub.COM/Acme/Repo", "github.com/Acme/Repo"},
		{"git@GITHUB.com:acme/repo", "github.com/acme/repo"},
		// Trailing slashes and .git, in any order.
		{"https://github.com/Acme/Repo/", "github.com/Acme/Repo"},
		{"https://github.com/Acme/Repo.git/", "github.com/Acme/Repo"},
		{"https://github.com/Acme/Repo.git.git", "github.com/Acme/Repo"},
		{"https://github.com/Acme/Repo//", "github.com/Acme/Repo"},
		{"https://github.com//Acme//Repo", "github.com/Acme/Repo"},
		{"https://github.com/Acme/Repo.gitx", "github.com/Acme/Repo.gitx"},
		{"https://github.com/Acme/.git", "github.com/Acme"},
		// User info, ports, query, fragment and whitespace go.
		{"https://x-access-token:ghp_abc@github.com/Acme/Repo.git", "github.com/Acme/Repo"},
		{"https://user@name@github.com/Acme/Repo", "github.com/Acme/Repo"},
		{"ssh://git@git.acme-labs.example:2222/acme/support-agent.git", "git.acme-labs.example/acme/support-agent"},
		{"https://git.acme-labs.example:3000/acme/support-agent", "git.acme-labs.example/acme/support-agent"},
		{"https://github.com/Acme/Repo?tab=readme#top", "github.com/Acme/Repo"},
		{"  https://github.com/Acme/Repo\n", "github.com/Acme/Repo"},
		// Other schemes and nested groups.
		{"git://github.com/Acme/Repo.git", "github.com/Acme/Repo"},
		{"git+ssh://git@github.com/Acme/Repo.git", "github.com/Acme/Repo"},
		{"http://gitlab.example.com/group/sub/repo", "gitlab.example.com/group/sub/repo"},
		{"git@gitlab.com:acme-labs/agents/support-agent.git", "gitlab.com/acme-labs/agents/support-agent"},
		// scp-like without user, and with a leading slash.
		{"github.com:Acme/Repo.git", "github.com/Acme/Repo"},
		{"git@github.com:/Acme/Repo.git", "github.com/Acme/Repo"},
		// ssh:// with an scp-like path: the intent is plain.
		{"ssh://git@github.com:Acme/Repo.git", "github.com/Acme/Repo"},
		// Already normalised input is stable.
		{"github.com/Acme/Repo", "github.com/Acme/Repo"},
		{"github.com", "github.com"},
		{"https://github.com", "github.com"},
		// IPv6 hosts keep their brackets.
		{"ssh://git@[::1]:2222/acme/repo.git", "[::1]/acme/repo"},
		{"git@[::1]:acme/repo.git", "[::1]/acme/repo"},
		{"[::1]/acme/repo", "[::1]/acme/repo"},
		// No host: "".
		{"", ""},
		{"   ", ""},
		{"file:///srv/git/repo.git", ""},
		{"/srv/git/repo.git", ""},
		{"git@", ""},
		{"https://[::1/repo", ""},
	}
	for _, tc := range tests {
		if got := webhook.NormalizeRepoURL(tc.in); got != tc.want {
			t.Errorf("NormalizeRepoURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := webhook.NormalizeRepoURL(tc.want); got != tc.want {
			t.Errorf("NormalizeRepoURL(%q) = %q, not stable", tc.want, got)
		}
	}
}

// TestRepoURLsMatch checks that every URL a host sends for the fixtures
// matches the agent source URL forms users type.
func TestRepoURLsMatch(t *testing.T) {
	tests := []struct {
		host    webhook.Host
		header  string
		event   string
		sources []string
	}{
		{webhook.GitHub, "X-GitHub-Event", "push", []string{
			"https://github.com/Acme-Labs/support-agent",
			"git@github.com:Acme-Labs/support-agent.git",
			"ssh://git@github.com/Acme-Labs/support-agent",
		}},
		{webhook.Gitea, "X-Gitea-Event", "push", []string{
			"https://git.acme-labs.example/acme/support-agent.git",
			"ssh://git@git.acme-labs.example:2222/acme/support-agent",
		}},
		{webhook.GitLab, "X-Gitlab-Event", "Push Hook", []string{
			"https://gitlab.com/acme-labs/agents/support-agent",
			"git@gitlab.com:acme-labs/agents/support-agent.git",
		}},
	}
	for _, tc := range tests {
		ev, err := webhook.Parse(tc.host, headers(tc.header, tc.event), fixture(t, tc.host, "push"))
		if err != nil {
			t.Fatal(err)
		}
		urls := webhook.RepoURLs(*ev.Push)
		if len(urls) != 3 {
			t.Errorf("%s: RepoURLs() = %q, want 3 URLs", tc.host, urls)
		}
		for _, u := range urls {
			for _, src := range tc.sources {
				if a, b := webhook.NormalizeRepoURL(u), webhook.NormalizeRepoURL(src); a != b {
					t.Errorf("%s: %q normalises to %q, source %q to %q", tc.host, u, a, src, b)
				}
			}
		}
	}
}

func TestRepoURLs(t *testing.T) {
	tests := []struct {
		name string
		repo webhook.Repo
		want []string
	}{
		{"all three", githubRepo(), []string{githubRepo().CloneURL, githubRepo().SSHURL, githubRepo().WebURL}},
		{"empty ones dropped", webhook.Repo{CloneURL: "https://h/a/b.git", WebURL: "https://h/a/b"}, []string{"https://h/a/b.git", "https://h/a/b"}},
		{"duplicates dropped", webhook.Repo{CloneURL: "https://h/a/b", SSHURL: "git@h:a/b", WebURL: "https://h/a/b"}, []string{"https://h/a/b", "git@h:a/b"}},
		{"none", webhook.Repo{FullName: "a/b"}, nil},
	}
	for _, tc := range tests {
		if got := webhook.RepoURLs(webhook.Push{Repository: tc.repo}); !slices.Equal(got, tc.want) {
			t.Errorf("%s: RepoURLs() = %q, want %q", tc.name, got, tc.want)
		}
	}
}
