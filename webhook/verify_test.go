package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"

	"svc/webhook"
)

const testSecret = "It's a Secret to Everybody"

// sign returns the hex HMAC-SHA256 of body, as the hosts compute it.
func sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// TestSignKnownAnswer pins sign to GitHub's documented example, so the
// tests below do not merely agree with themselves.
func TestSignKnownAnswer(t *testing.T) {
	const want = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	body := []byte("Hello, World!")
	if got := sign(testSecret, body); got != want {
		t.Fatalf("sign() = %s, want %s", got, want)
	}
	h := headers("X-Hub-Signature-256", "sha256="+want)
	if err := webhook.Verify(webhook.GitHub, h, body, testSecret); err != nil {
		t.Fatalf("Verify(GitHub docs example) = %v, want nil", err)
	}
}

func TestVerify(t *testing.T) {
	body := fixture(t, webhook.GitHub, "push")
	giteaBody := fixture(t, webhook.Gitea, "push")
	gitlabBody := fixture(t, webhook.GitLab, "push")
	tampered := []byte(strings.Replace(string(body), "refs/heads/main", "refs/heads/evil", 1))
	good := sign(testSecret, body)
	goodGitea := sign(testSecret, giteaBody)
	wrong := sign("another secret", body)

	tests := []struct {
		name    string
		host    webhook.Host
		header  http.Header
		body    []byte
		secret  string
		wantErr error // nil: must verify
	}{
		// GitHub
		{"github good", webhook.GitHub, headers("X-Hub-Signature-256", "sha256="+good), body, testSecret, nil},
		{"github upper-case hex", webhook.GitHub, headers("X-Hub-Signature-256", "sha256="+strings.ToUpper(good)), body, testSecret, nil},
		{"github missing", webhook.GitHub, headers("X-Hub-Signature", "sha1=0"), body, testSecret, webhook.ErrMissingSignature},
		{"github wrong secret", webhook.GitHub, headers("X-Hub-Signature-256", "sha256="+wrong), body, testSecret, webhook.ErrBadSignature},
		{"github tampered body", webhook.GitHub, headers("X-Hub-Signature-256", "sha256="+good), tampered, testSecret, webhook.ErrBadSignature},
		{"github without prefix", webhook.GitHub, headers("X-Hub-Signature-256", good), body, testSecret, webhook.ErrBadSignature},
		{"github sha1 prefix", webhook.GitHub, headers("X-Hub-Signature-256", "sha1="+good), body, testSecret, webhook.ErrBadSignature},
		{"github not hex", webhook.GitHub, headers("X-Hub-Signature-256", "sha256=zz"+good[2:]), body, testSecret, webhook.ErrBadSignature},
		{"github truncated", webhook.GitHub, headers("X-Hub-Signature-256", "sha256="+good[:62]), body, testSecret, webhook.ErrBadSignature},
		{"github empty secret", webhook.GitHub, headers("X-Hub-Signature-256", "sha256="+sign("", body)), body, "", webhook.ErrEmptySecret},
		// Gitea and Forgejo
		{"gitea good", webhook.Gitea, headers("X-Gitea-Signature", goodGitea), giteaBody, testSecret, nil},
		{"forgejo good", webhook.Gitea, headers("X-Forgejo-Signature", goodGitea), giteaBody, testSecret, nil},
		{"gitea and forgejo both good", webhook.Gitea, headers("X-Gitea-Signature", goodGitea, "X-Forgejo-Signature", goodGitea), giteaBody, testSecret, nil},
		{"forgejo bad next to gitea good", webhook.Gitea, headers("X-Gitea-Signature", goodGitea, "X-Forgejo-Signature", wrong), giteaBody, testSecret, webhook.ErrBadSignature},
		{"gitea missing", webhook.Gitea, headers("X-Hub-Signature-256", "sha256="+goodGitea), giteaBody, testSecret, webhook.ErrMissingSignature},
		{"gitea wrong secret", webhook.Gitea, headers("X-Gitea-Signature", sign("another secret", giteaBody)), giteaBody, testSecret, webhook.ErrBadSignature},
		{"gitea tampered body", webhook.Gitea, headers("X-Gitea-Signature", goodGitea), append([]byte(" "), giteaBody...), testSecret, webhook.ErrBadSignature},
		{"gitea with sha256 prefix", webhook.Gitea, headers("X-Gitea-Signature", "sha256="+goodGitea), giteaBody, testSecret, webhook.ErrBadSignature},
		{"gitea empty secret", webhook.Gitea, headers("X-Gitea-Signature", sign("", giteaBody)), giteaBody, "", webhook.ErrEmptySecret},
		// GitLab
		{"gitlab good", webhook.GitLab, headers("X-Gitlab-Token", testSecret), gitlabBody, testSecret, nil},
		{"gitlab missing", webhook.GitLab, headers("X-Gitlab-Event", "Push Hook"), gitlabBody, testSecret, webhook.ErrMissingSignature},
		{"gitlab wrong secret", webhook.GitLab, headers("X-Gitlab-Token", "another secret"), gitlabBody, testSecret, webhook.ErrBadSignature},
		{"gitlab prefix of the secret", webhook.GitLab, headers("X-Gitlab-Token", testSecret[:len(testSecret)-1]), gitlabBody, testSecret, webhook.ErrBadSignature},
		{"gitlab secret plus a byte", webhook.GitLab, headers("X-Gitlab-Token", testSecret+"!"), gitlabBody, testSecret, webhook.ErrBadSignature},
		{"gitlab case differs", webhook.GitLab, headers("X-Gitlab-Token", strings.ToUpper(testSecret)), gitlabBody, testSecret, webhook.ErrBadSignature},
		{"gitlab empty secret", webhook.GitLab, headers("X-Gitlab-Token", ""), gitlabBody, "", webhook.ErrEmptySecret},
		// Hosts
		{"unknown host", "bitbucket", headers("X-Hub-Signature", good), body, testSecret, webhook.ErrUnsupportedHost},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := webhook.Verify(tc.host, tc.header, tc.body, tc.secret)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Verify() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Verify() = %v, want errors.Is %v", err, tc.wantErr)
			}
		})
	}
}

// TestVerifyMessages checks that errors name the host and header.
func TestVerifyMessages(t *testing.T) {
	body := []byte(`{}`)
	tests := []struct {
		host   webhook.Host
		header http.Header
		want   string
	}{
		{webhook.GitHub, nil, "webhook: missing signature: github request has no X-Hub-Signature-256 header"},
		{webhook.GitHub, headers("X-Hub-Signature-256", "abc"), "webhook: bad signature: github X-Hub-Signature-256 does not start with sha256="},
		{webhook.GitHub, headers("X-Hub-Signature-256", "sha256=abc"), "webhook: bad signature: github X-Hub-Signature-256 is not a hex SHA-256 HMAC"},
		{webhook.GitHub, headers("X-Hub-Signature-256", "sha256="+sign("x", body)), "webhook: bad signature: github X-Hub-Signature-256 does not match the body"},
		{webhook.Gitea, nil, "webhook: missing signature: gitea request has no X-Gitea-Signature or X-Forgejo-Signature header"},
		{webhook.Gitea, headers("X-Forgejo-Signature", sign("x", body)), "webhook: bad signature: gitea X-Forgejo-Signature does not match the body"},
		{webhook.GitLab, nil, "webhook: missing signature: gitlab request has no X-Gitlab-Token header"},
		{webhook.GitLab, headers("X-Gitlab-Token", "x"), "webhook: bad signature: gitlab X-Gitlab-Token does not match the secret"},
	}
	for _, tc := range tests {
		err := webhook.Verify(tc.host, tc.header, body, testSecret)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Verify(%s, %v) = %v, want %q", tc.host, tc.header, err, tc.want)
		}
	}
}

// BenchmarkVerifyGitHub measures HMAC verification of the push fixture.
func BenchmarkVerifyGitHub(b *testing.B) {
	body := fixture(b, webhook.GitHub, "push")
	h := headers("X-Hub-Signature-256", "sha256="+sign(testSecret, body))
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := webhook.Verify(webhook.GitHub, h, body, testSecret); err != nil {
			b.Fatal(err)
		}
	}
}
