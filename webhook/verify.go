package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
)

// Verify checks that body was sent by the host that knows secret. Call it
// on the raw request body, before Parse, whenever the agent has a secret:
//
//   - GitHub: X-Hub-Signature-256 is "sha256=" + hex HMAC-SHA256(secret, body).
//   - Gitea: X-Gitea-Signature (Forgejo: X-Forgejo-Signature) is the bare hex
//     HMAC-SHA256(secret, body); when both headers are present both must match.
//   - GitLab: X-Gitlab-Token equals the secret. GitLab signs nothing, so the
//     token is compared in constant time (also in its length) instead.
//
// It returns nil on success, or an error matching ErrMissingSignature (no
// header), ErrBadSignature (malformed or wrong), ErrEmptySecret or
// ErrUnsupportedHost. Verify is safe for concurrent use.
func Verify(host Host, header http.Header, body []byte, secret string) error {
	if secret == "" {
		return ErrEmptySecret
	}
	switch host {
	case GitHub:
		const name = "X-Hub-Signature-256"
		value := header.Get(name)
		if value == "" {
			return fmt.Errorf("%w: github request has no %s header", ErrMissingSignature, name)
		}
		hexSum, ok := strings.CutPrefix(value, "sha256=")
		if !ok {
			return fmt.Errorf("%w: github %s does not start with sha256=", ErrBadSignature, name)
		}
		return checkHMAC(GitHub, name, hexSum, body, secret)
	case Gitea:
		found := false
		for _, name := range []string{"X-Gitea-Signature", "X-Forgejo-Signature"} {
			value := header.Get(name)
			if value == "" {
				continue
			}
			found = true
			if err := checkHMAC(Gitea, name, value, body, secret); err != nil {
				return err
			}
		}
		if !found {
			return fmt.Errorf("%w: gitea request has no X-Gitea-Signature or X-Forgejo-Signature header", ErrMissingSignature)
		}
		return nil
	case GitLab:
		const name = "X-Gitlab-Token"
		token := header.Get(name)
		if token == "" {
			return fmt.Errorf("%w: gitlab request has no %s header", ErrMissingSignature, name)
		}
		// Hashing both sides first makes the comparison constant-time in
		// the length of the secret as well as its content.
		got, want := sha256.Sum256([]byte(token)), sha256.Sum256([]byte(secret))
		if !hmac.Equal(got[:], want[:]) {
			return fmt.Errorf("%w: gitlab %s does not match the secret", ErrBadSignature, name)
		}
		return nil
	}
	return fmt.Errorf("%w %q", ErrUnsupportedHost, host)
}

// checkHMAC compares a hex HMAC-SHA256 from header name with the body's.
func checkHMAC(host Host, name, hexSum string, body []byte, secret string) error {
	got, err := hex.DecodeString(strings.TrimSpace(hexSum))
	if err != nil || len(got) != sha256.Size {
		return fmt.Errorf("%w: %s %s is not a hex SHA-256 HMAC", ErrBadSignature, host, name)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return fmt.Errorf("%w: %s %s does not match the body", ErrBadSignature, host, name)
	}
	return nil
}
