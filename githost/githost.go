// Package githost posts commit statuses to the git host of an agent's source, so that the result
// of its evals shows on the commit where developers look: GitHub (and GitHub Enterprise), Gitea
// and Forgejo, GitLab. The host is chosen by the token the agent has: GITHUB_TOKEN, GITEA_TOKEN
// or GITLAB_TOKEN (agent secrets).
package githost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Kinds of host.
const (
	GitHub = "github"
	Gitea  = "gitea" // Gitea and Forgejo
	GitLab = "gitlab"
)

// TokenNames are the agent secrets that name a host, in the order they are tried.
var TokenNames = []string{"GITHUB_TOKEN", "GITEA_TOKEN", "GITLAB_TOKEN"}

// KindOf is the host kind a token secret name stands for.
func KindOf(tokenName string) string {
	switch tokenName {
	case "GITHUB_TOKEN":
		return GitHub
	case "GITEA_TOKEN":
		return Gitea
	case "GITLAB_TOKEN":
		return GitLab
	}
	return ""
}

// Status is a commit status to post.
type Status struct {
	Commit      string
	State       string // pending | success | failure | error
	Context     string // svc/evals
	Description string
	TargetURL   string // a link to the results, or ""
}

// Poster posts statuses with retries. The zero value uses http.DefaultClient and 3 attempts.
type Poster struct {
	Client   *http.Client
	Attempts int
	Backoff  time.Duration // before the second attempt, doubled after; 0 means 200 ms
}

// Post posts st for the repository at repoURL (its clone URL) on a host of kind with token. An
// answer of 5xx or 429, or a transport error, is retried; other failures are returned at once.
func (p Poster) Post(ctx context.Context, kind, repoURL, token string, st Status) error {
	req, err := request(kind, repoURL, token, st)
	if err != nil {
		return err
	}
	client := p.Client
	if client == nil {
		client = http.DefaultClient
	}
	attempts, backoff := max(p.Attempts, 1), p.Backoff
	if p.Attempts == 0 {
		attempts = 3
	}
	if backoff <= 0 {
		backoff = 200 * time.Millisecond
	}
	var last error
	for i := range attempts {
		if i > 0 {
			select {
			case <-ctx.Done():
				return errors.Join(last, ctx.Err())
			case <-time.After(backoff):
			}
			backoff *= 2
		}
		r, err := req(ctx)
		if err != nil {
			return err
		}
		resp, err := client.Do(r)
		if err != nil {
			last = fmt.Errorf("post commit status to %s: %w", r.URL.Host, err)
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		switch {
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			return nil
		case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
			last = fmt.Errorf("post commit status to %s: %s", r.URL.Host, resp.Status)
			continue
		default:
			return fmt.Errorf("post commit status to %s: %s: %s", r.URL.Host, resp.Status, strings.TrimSpace(string(body)))
		}
	}
	return last
}

// request builds the host's status request for repoURL, or an error for a URL or kind it cannot
// use. The token is sent in a header and never appears in an error.
func request(kind, repoURL, token string, st Status) (func(context.Context) (*http.Request, error), error) {
	u, err := url.Parse(repoURL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("the source URL is not an http(s) repository URL a host API can be derived from")
	}
	path := strings.TrimSuffix(strings.Trim(u.Path, "/"), ".git")
	if strings.Count(path, "/") < 1 {
		return nil, fmt.Errorf("the source URL names no owner/repository")
	}
	base := u.Scheme + "://" + u.Host
	var target string
	var body any
	header := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json"}}
	switch kind {
	case GitHub:
		api := base + "/api/v3" // GitHub Enterprise
		if u.Host == "github.com" {
			api = "https://api.github.com"
		}
		target = api + "/repos/" + path + "/statuses/" + st.Commit
		body = map[string]string{"state": st.State, "context": st.Context, "description": st.Description, "target_url": st.TargetURL}
		header.Set("Authorization", "Bearer "+token)
		header.Set("Accept", "application/vnd.github+json")
	case Gitea:
		target = base + "/api/v1/repos/" + path + "/statuses/" + st.Commit
		body = map[string]string{"state": st.State, "context": st.Context, "description": st.Description, "target_url": st.TargetURL}
		header.Set("Authorization", "token "+token)
	case GitLab:
		target = base + "/api/v4/projects/" + url.PathEscape(path) + "/statuses/" + st.Commit
		state := st.State
		switch state {
		case "failure", "error":
			state = "failed"
		}
		body = map[string]string{"state": state, "name": st.Context, "description": st.Description, "target_url": st.TargetURL}
		header.Set("PRIVATE-TOKEN", token)
	default:
		return nil, fmt.Errorf("unknown git host kind %q", kind)
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (*http.Request, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		r.Header = header.Clone()
		return r, nil
	}, nil
}
