package webhook

import (
	"net/http"
)

// githubPush is the part of GitHub's push payload the service reads.
// Required fields are pointers so that an absent field can be told apart
// from an empty one.
type githubPush struct {
	Ref        *string       `json:"ref"`
	Before     *string       `json:"before"`
	After      *string       `json:"after"`
	Deleted    bool          `json:"deleted"`
	Repository *githubRepo   `json:"repository"`
	Pusher     githubPusher  `json:"pusher"`
	HeadCommit *githubCommit `json:"head_commit"`
}

type githubRepo struct {
	FullName *string `json:"full_name"`
	HTMLURL  string  `json:"html_url"`
	CloneURL *string `json:"clone_url"`
	SSHURL   string  `json:"ssh_url"`
}

type githubPusher struct {
	Name string `json:"name"`
}

type githubCommit struct {
	ID      *string `json:"id"`
	Message string  `json:"message"`
}

// parseGitHub handles deliveries to /webhooks/github. The event is named by
// X-GitHub-Event; only push and ping matter, the rest are ignored.
func parseGitHub(header http.Header, body []byte) (Event, error) {
	name := header.Get("X-GitHub-Event")
	switch name {
	case "":
		return Event{}, missingEventHeader(GitHub, "X-GitHub-Event")
	case "ping":
		data, err := formBody(GitHub, "ping", header, body)
		if err != nil {
			return Event{}, err
		}
		var ping struct{}
		if err := decode(GitHub, "ping", data, &ping); err != nil {
			return Event{}, err
		}
		return Event{Kind: KindPing}, nil
	case "push":
	default:
		return ignored("github event %q is not a push", name), nil
	}

	const event = "push"
	data, err := formBody(GitHub, event, header, body)
	if err != nil {
		return Event{}, err
	}
	var payload githubPush
	if err := decode(GitHub, event, data, &payload); err != nil {
		return Event{}, err
	}
	return payload.toEvent()
}

// toEvent validates the payload and converts it.
func (g *githubPush) toEvent() (Event, error) {
	const event = "push"
	p := &Push{Host: GitHub}
	var err error
	if p.Ref, err = checkRef(GitHub, event, "ref", g.Ref); err != nil {
		return Event{}, err
	}
	if p.Before, err = checkSHA(GitHub, event, "before", g.Before); err != nil {
		return Event{}, err
	}
	if p.After, err = checkSHA(GitHub, event, "after", g.After); err != nil {
		return Event{}, err
	}
	if g.Repository == nil {
		return Event{}, missing(GitHub, event, "repository")
	}
	if p.Repository.FullName, err = nonEmpty(GitHub, event, "repository.full_name", g.Repository.FullName); err != nil {
		return Event{}, err
	}
	if p.Repository.CloneURL, err = nonEmpty(GitHub, event, "repository.clone_url", g.Repository.CloneURL); err != nil {
		return Event{}, err
	}
	p.Repository.SSHURL = g.Repository.SSHURL
	p.Repository.WebURL = g.Repository.HTMLURL
	p.Pusher = g.Pusher.Name
	p.Deleted = g.Deleted || isZeroSHA(p.After)
	if p.Deleted {
		p.After = ZeroSHA
	}
	if !splitRef(p) {
		return ignored("github push to %q is neither a branch nor a tag", p.Ref), nil
	}
	if g.HeadCommit != nil && !p.Deleted {
		head, err := checkSHA(GitHub, event, "head_commit.id", g.HeadCommit.ID)
		if err != nil {
			return Event{}, err
		}
		headCommit(p, head, g.HeadCommit.Message)
	}
	return Event{Kind: KindPush, Push: p}, nil
}
