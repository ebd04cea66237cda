package webhook

import (
	"net/http"
	"strings"
)

// gitlabPush is the part of GitLab's push and tag push payloads (project
// hooks and system hooks alike) the service reads. Required fields are
// pointers so that absence can be detected.
type gitlabPush struct {
	Before       *string        `json:"before"`
	After        *string        `json:"after"`
	Ref          *string        `json:"ref"`
	CheckoutSHA  *string        `json:"checkout_sha"`
	UserUsername string         `json:"user_username"`
	UserName     string         `json:"user_name"`
	Project      *gitlabProject `json:"project"`
	Commits      []gitlabCommit `json:"commits"`
}

type gitlabProject struct {
	WebURL            string  `json:"web_url"`
	GitSSHURL         string  `json:"git_ssh_url"`
	GitHTTPURL        *string `json:"git_http_url"`
	PathWithNamespace *string `json:"path_with_namespace"`
}

type gitlabCommit struct {
	ID      string `json:"id"`
	Message string `json:"message"`
}

// gitlabKind is the discriminator of a system hook body. Newer GitLab
// versions send object_kind, older ones only event_name.
type gitlabKind struct {
	ObjectKind string `json:"object_kind"`
	EventName  string `json:"event_name"`
}

// parseGitLab handles deliveries to /webhooks/gitlab. GitLab has no ping
// (its "Test" button sends a real push); project hooks name the event in
// X-Gitlab-Event, system hooks name it in the body.
func parseGitLab(header http.Header, body []byte) (Event, error) {
	name := header.Get("X-Gitlab-Event")
	var event string
	switch name {
	case "":
		return Event{}, missingEventHeader(GitLab, "X-Gitlab-Event")
	case "Push Hook":
		event = "push"
	case "Tag Push Hook":
		event = "tag push"
	case "System Hook":
		var kind gitlabKind
		if err := decode(GitLab, "system hook", body, &kind); err != nil {
			return Event{}, err
		}
		k := kind.ObjectKind
		if k == "" {
			k = kind.EventName
		}
		switch k {
		case "":
			return Event{}, missing(GitLab, "system hook", "object_kind")
		case "push":
			event = "system hook push"
		case "tag_push":
			event = "system hook tag push"
		default:
			return ignored("gitlab system hook %q is not a push", k), nil
		}
	default:
		return ignored("gitlab event %q is not a push", name), nil
	}
	var payload gitlabPush
	if err := decode(GitLab, event, body, &payload); err != nil {
		return Event{}, err
	}
	return payload.toEvent(event)
}

// toEvent validates the payload and converts it. The body's object_kind is
// not checked against the header: GitLab's "Test" button for tag push
// events has sent branch push bodies, and the ref tells the two apart.
func (g *gitlabPush) toEvent(event string) (Event, error) {
	p := &Push{Host: GitLab}
	var err error
	if p.Ref, err = checkRef(GitLab, event, "ref", g.Ref); err != nil {
		return Event{}, err
	}
	if p.Before, err = checkSHA(GitLab, event, "before", g.Before); err != nil {
		return Event{}, err
	}
	if p.After, err = checkSHA(GitLab, event, "after", g.After); err != nil {
		return Event{}, err
	}
	if g.Project == nil {
		return Event{}, missing(GitLab, event, "project")
	}
	if p.Repository.CloneURL, err = nonEmpty(GitLab, event, "project.git_http_url", g.Project.GitHTTPURL); err != nil {
		return Event{}, err
	}
	if p.Repository.FullName, err = nonEmpty(GitLab, event, "project.path_with_namespace", g.Project.PathWithNamespace); err != nil {
		return Event{}, err
	}
	p.Repository.SSHURL = g.Project.GitSSHURL
	p.Repository.WebURL = g.Project.WebURL
	p.Pusher = g.UserUsername
	if p.Pusher == "" {
		p.Pusher = g.UserName
	}
	p.Deleted = isZeroSHA(p.After)
	if p.Deleted {
		p.After = ZeroSHA
	}
	if !splitRef(p) {
		return ignored("gitlab push to %q is neither a branch nor a tag", p.Ref), nil
	}
	if p.Deleted {
		return Event{Kind: KindPush, Push: p}, nil
	}
	// checkout_sha is the commit at the new head: for an annotated tag
	// "after" is the tag object, checkout_sha the tagged commit.
	if g.CheckoutSHA != nil && *g.CheckoutSHA != "" {
		if p.After, err = checkSHA(GitLab, event, "checkout_sha", g.CheckoutSHA); err != nil {
			return Event{}, err
		}
	}
	for _, c := range g.Commits {
		if strings.EqualFold(c.ID, p.After) {
			p.HeadMessage = c.Message
			break
		}
	}
	return Event{Kind: KindPush, Push: p}, nil
}
