package webhook

import (
	"net/http"
	"strings"
)

// giteaPush is the part of Gitea's (and Forgejo's) push payload the service
// reads. Required fields are pointers so that absence can be detected.
type giteaPush struct {
	Ref        *string       `json:"ref"`
	Before     *string       `json:"before"`
	After      *string       `json:"after"`
	Commits    []giteaCommit `json:"commits"`
	HeadCommit *giteaCommit  `json:"head_commit"`
	Repository *giteaRepo    `json:"repository"`
	Pusher     giteaUser     `json:"pusher"`
}

// giteaDelete is Gitea's delete event, the only notice it sends when a
// branch is deleted (tag deletions also come as a push).
type giteaDelete struct {
	Ref        *string    `json:"ref"`
	RefType    *string    `json:"ref_type"`
	Repository *giteaRepo `json:"repository"`
	Sender     giteaUser  `json:"sender"`
}

type giteaRepo struct {
	FullName *string `json:"full_name"`
	HTMLURL  string  `json:"html_url"`
	CloneURL *string `json:"clone_url"`
	SSHURL   string  `json:"ssh_url"`
}

type giteaUser struct {
	Login    string `json:"login"`
	Username string `json:"username"`
}

type giteaCommit struct {
	ID      *string `json:"id"`
	Message string  `json:"message"`
}

// name returns the user's login.
func (u giteaUser) name() string {
	if u.Login != "" {
		return u.Login
	}
	return u.Username
}

// parseGitea handles deliveries to /webhooks/gitea. Forgejo sends
// X-Forgejo-Event alongside (or instead of) X-Gitea-Event.
func parseGitea(header http.Header, body []byte) (Event, error) {
	name := header.Get("X-Gitea-Event")
	if name == "" {
		name = header.Get("X-Forgejo-Event")
	}
	switch name {
	case "":
		return Event{}, missingEventHeader(Gitea, "X-Gitea-Event or X-Forgejo-Event")
	case "ping":
		// Gitea's "test delivery" sends a push; a ping is handled in case
		// a version or fork sends one.
		data, err := formBody(Gitea, "ping", header, body)
		if err != nil {
			return Event{}, err
		}
		var ping struct{}
		if err := decode(Gitea, "ping", data, &ping); err != nil {
			return Event{}, err
		}
		return Event{Kind: KindPing}, nil
	case "push":
		data, err := formBody(Gitea, "push", header, body)
		if err != nil {
			return Event{}, err
		}
		var payload giteaPush
		if err := decode(Gitea, "push", data, &payload); err != nil {
			return Event{}, err
		}
		return payload.toEvent()
	case "delete":
		data, err := formBody(Gitea, "delete", header, body)
		if err != nil {
			return Event{}, err
		}
		var payload giteaDelete
		if err := decode(Gitea, "delete", data, &payload); err != nil {
			return Event{}, err
		}
		return payload.toEvent()
	}
	return ignored("gitea event %q is not a push", name), nil
}

// repo validates and converts the repository object.
func (r *giteaRepo) repo(event string) (Repo, error) {
	if r == nil {
		return Repo{}, missing(Gitea, event, "repository")
	}
	repo := Repo{SSHURL: r.SSHURL, WebURL: r.HTMLURL}
	var err error
	if repo.FullName, err = nonEmpty(Gitea, event, "repository.full_name", r.FullName); err != nil {
		return Repo{}, err
	}
	if repo.CloneURL, err = nonEmpty(Gitea, event, "repository.clone_url", r.CloneURL); err != nil {
		return Repo{}, err
	}
	return repo, nil
}

// toEvent validates the push payload and converts it.
func (g *giteaPush) toEvent() (Event, error) {
	const event = "push"
	p := &Push{Host: Gitea}
	var err error
	if p.Ref, err = checkRef(Gitea, event, "ref", g.Ref); err != nil {
		return Event{}, err
	}
	if p.Before, err = checkSHA(Gitea, event, "before", g.Before); err != nil {
		return Event{}, err
	}
	if p.After, err = checkSHA(Gitea, event, "after", g.After); err != nil {
		return Event{}, err
	}
	if p.Repository, err = g.Repository.repo(event); err != nil {
		return Event{}, err
	}
	p.Pusher = g.Pusher.name()
	p.Deleted = isZeroSHA(p.After)
	if p.Deleted {
		p.After = ZeroSHA
	}
	if !splitRef(p) {
		return ignored("gitea push to %q is neither a branch nor a tag", p.Ref), nil
	}
	if p.Deleted {
		return Event{Kind: KindPush, Push: p}, nil
	}
	if g.HeadCommit != nil {
		head, err := checkSHA(Gitea, event, "head_commit.id", g.HeadCommit.ID)
		if err != nil {
			return Event{}, err
		}
		headCommit(p, head, g.HeadCommit.Message)
		return Event{Kind: KindPush, Push: p}, nil
	}
	// Older Gitea versions send no head_commit; the commit list has it.
	for _, c := range g.Commits {
		if c.ID != nil && strings.EqualFold(*c.ID, p.After) {
			p.HeadMessage = c.Message
			break
		}
	}
	return Event{Kind: KindPush, Push: p}, nil
}

// toEvent converts a delete event into a push that deleted the ref. Gitea
// sends the short ref name plus its type, and no commit SHAs.
func (g *giteaDelete) toEvent() (Event, error) {
	const event = "delete"
	if g.Ref == nil {
		return Event{}, missing(Gitea, event, "ref")
	}
	if g.RefType == nil {
		return Event{}, missing(Gitea, event, "ref_type")
	}
	var prefix string
	switch *g.RefType {
	case "branch":
		prefix = "refs/heads/"
	case "tag":
		prefix = "refs/tags/"
	default:
		return Event{}, invalid(Gitea, event, "ref_type", `want "branch" or "tag", got `+quote(*g.RefType))
	}
	full := *g.Ref
	if !strings.HasPrefix(full, "refs/") {
		full = prefix + full
	}
	ref, err := checkRef(Gitea, event, "ref", &full)
	if err != nil {
		return Event{}, err
	}
	repo, err := g.Repository.repo(event)
	if err != nil {
		return Event{}, err
	}
	p := &Push{Host: Gitea, Repository: repo, Ref: ref, After: ZeroSHA, Deleted: true, Pusher: g.Sender.name()}
	if !splitRef(p) {
		return ignored("gitea delete of %q is neither a branch nor a tag", p.Ref), nil
	}
	return Event{Kind: KindPush, Push: p}, nil
}
