package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"
)

// Host names a git host flavour. Its value is also the last path segment of
// the webhook route (/webhooks/<host>).
type Host string

// The supported hosts. Forgejo speaks the Gitea dialect and uses Gitea.
const (
	GitHub Host = "github"
	Gitea  Host = "gitea"
	GitLab Host = "gitlab"
)

// MaxPayloadBytes is the largest body Parse accepts. GitHub caps webhook
// payloads at 25 MB; the other hosts send less. Callers should read the
// request body through http.MaxBytesReader with this limit.
const MaxPayloadBytes = 25 << 20

// ZeroSHA is the all-zero object name hosts send as "after" when a ref is
// deleted (and as "before" when it is created).
const ZeroSHA = "0000000000000000000000000000000000000000"

// Errors that callers branch on. Match them with errors.Is.
var (
	// ErrUnsupportedHost means the Host is not one of GitHub, Gitea, GitLab.
	ErrUnsupportedHost = errors.New("webhook: unsupported host")
	// ErrUnsupportedEvent means the request carries no event header for its
	// host, so it cannot be a webhook delivery from that host.
	ErrUnsupportedEvent = errors.New("webhook: unsupported event")
	// ErrPayloadTooLarge means the body is longer than MaxPayloadBytes.
	ErrPayloadTooLarge = errors.New("webhook: payload too large")
	// ErrInvalidPayload is matched by every *PayloadError: the body is not
	// JSON, or a field the service needs is missing or malformed.
	ErrInvalidPayload = errors.New("webhook: invalid payload")
	// ErrMissingSignature means a secret is set but the request carries no
	// signature (or token) header.
	ErrMissingSignature = errors.New("webhook: missing signature")
	// ErrBadSignature means the signature header is malformed or does not
	// match the body and secret.
	ErrBadSignature = errors.New("webhook: bad signature")
	// ErrEmptySecret means Verify was called with an empty secret, which
	// would accept forged requests; callers skip Verify when no secret is set.
	ErrEmptySecret = errors.New("webhook: empty secret")
)

// PayloadError reports a body that cannot be turned into an event. It
// matches ErrInvalidPayload with errors.Is.
type PayloadError struct {
	// Host is the host whose payload was parsed.
	Host Host
	// Event is the event being parsed, e.g. "push", "tag push", "delete".
	Event string
	// Field is the dotted JSON path of the offending field, e.g.
	// "repository.clone_url"; empty when the body as a whole is bad.
	Field string
	// Problem is "missing" for an absent or null field, otherwise why the
	// value (or the body, when Field is empty) is invalid.
	Problem string
	// Err is the underlying decoding error, if any.
	Err error
}

// Error returns e.g. `webhook: github push: missing "after"`.
func (e *PayloadError) Error() string {
	prefix := "webhook: " + string(e.Host) + " " + e.Event
	switch {
	case e.Field == "":
		return prefix + ": " + e.Problem
	case e.Problem == "missing":
		return fmt.Sprintf("%s: missing %q", prefix, e.Field)
	default:
		return fmt.Sprintf("%s: invalid %q: %s", prefix, e.Field, e.Problem)
	}
}

// Is reports whether target is ErrInvalidPayload.
func (e *PayloadError) Is(target error) bool { return target == ErrInvalidPayload }

// Unwrap returns the underlying decoding error, if any.
func (e *PayloadError) Unwrap() error { return e.Err }

// EventKind says what the caller should do with an Event.
type EventKind string

// The event kinds.
const (
	// KindPush is a push to a branch or tag; Event.Push is set.
	KindPush EventKind = "push"
	// KindPing is a host's connectivity check; answer 200 and do nothing.
	KindPing EventKind = "ping"
	// KindIgnored is a valid delivery of an event the service does not act
	// on; Event.Reason says which.
	KindIgnored EventKind = "ignored"
)

// Event is the outcome of Parse.
type Event struct {
	// Kind says which of the other fields are set.
	Kind EventKind
	// Push is set when Kind is KindPush.
	Push *Push
	// Reason explains a KindIgnored event, e.g. `github event "issues" is not a push`.
	Reason string
}

// Repo identifies the repository a push went to, by every URL the host gave.
type Repo struct {
	// CloneURL is the HTTPS clone URL, e.g. https://github.com/acme/agent.git.
	CloneURL string
	// SSHURL is the SSH clone URL, e.g. git@github.com:acme/agent.git.
	SSHURL string
	// WebURL is the repository's web page, e.g. https://github.com/acme/agent.
	WebURL string
	// FullName is owner/name (GitLab: the path with namespace).
	FullName string
}

// Push is a host-neutral push event.
type Push struct {
	// Host is the host that sent the event.
	Host Host
	// Repository is the repository pushed to.
	Repository Repo
	// Ref is the full ref, e.g. refs/heads/main or refs/tags/v1.2.0.
	Ref string
	// Branch is the branch name for refs/heads/ refs, "" for tags.
	Branch string
	// Tag is the tag name for refs/tags/ refs, "" for branches.
	Tag string
	// Before is the commit the ref pointed at before the push (ZeroSHA or
	// "" when the ref is new or the host does not say).
	Before string
	// After is the commit to build. For a tag it is the tagged commit, not
	// the annotated tag object. For a deletion it is ZeroSHA.
	After string
	// Deleted reports that the push deleted the ref.
	Deleted bool
	// Pusher is the login of the user who pushed, if the host says.
	Pusher string
	// HeadMessage is the message of the After commit, if the host sent it.
	HeadMessage string
}

// HostFromPath maps the last segment of a webhook route to its Host:
// "github", "gitea", "forgejo" (Gitea dialect) and "gitlab", in any case.
func HostFromPath(name string) (Host, bool) {
	switch strings.ToLower(name) {
	case "github":
		return GitHub, true
	case "gitea", "forgejo":
		return Gitea, true
	case "gitlab":
		return GitLab, true
	}
	return "", false
}

// Parse turns one webhook delivery into an Event. It does not check the
// signature; call Verify first when a secret is set.
//
// Results:
//   - (Event{Kind: KindPush, Push: p}, nil): a push, including tag pushes and
//     ref deletions (p.Tag, p.Deleted say which).
//   - (Event{Kind: KindPing}, nil): a ping.
//   - (Event{Kind: KindIgnored, Reason: r}, nil): a valid delivery to ignore.
//   - (Event{}, err): err matches ErrUnsupportedHost, ErrUnsupportedEvent,
//     ErrPayloadTooLarge or ErrInvalidPayload (a *PayloadError).
//
// Parse is safe for concurrent use and does not retain header or body.
func Parse(host Host, header http.Header, body []byte) (Event, error) {
	if len(body) > MaxPayloadBytes {
		return Event{}, fmt.Errorf("%w: %s body is %d bytes, limit %d", ErrPayloadTooLarge, host, len(body), MaxPayloadBytes)
	}
	switch host {
	case GitHub:
		return parseGitHub(header, body)
	case Gitea:
		return parseGitea(header, body)
	case GitLab:
		return parseGitLab(header, body)
	}
	return Event{}, fmt.Errorf("%w %q", ErrUnsupportedHost, host)
}

// ignored builds a KindIgnored event.
func ignored(format string, args ...any) Event {
	return Event{Kind: KindIgnored, Reason: fmt.Sprintf(format, args...)}
}

// formBody returns the JSON document of a delivery. GitHub and Gitea can be
// configured to send application/x-www-form-urlencoded bodies with the JSON
// in the "payload" field; everything else is taken as JSON.
func formBody(host Host, event string, header http.Header, body []byte) ([]byte, error) {
	// An absent or unparsable Content-Type means JSON, as it does for the hosts.
	if mediaType, _, err := mime.ParseMediaType(header.Get("Content-Type")); err != nil || mediaType != "application/x-www-form-urlencoded" {
		return body, nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, &PayloadError{Host: host, Event: event, Problem: "invalid form body: " + err.Error(), Err: err}
	}
	if !form.Has("payload") {
		return nil, &PayloadError{Host: host, Event: event, Field: "payload", Problem: "missing"}
	}
	return []byte(form.Get("payload")), nil
}

// decode unmarshals a JSON object into v, turning decoding failures into a
// *PayloadError that names the field.
func decode(host Host, event string, data []byte, v any) error {
	err := json.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	pe := &PayloadError{Host: host, Event: event, Err: err}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		if typeErr.Field == "" {
			pe.Problem = fmt.Sprintf("invalid JSON: body is %s, want object", typeErr.Value)
		} else {
			pe.Field = typeErr.Field
			pe.Problem = fmt.Sprintf("want %s, got %s", jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
		}
		return pe
	}
	pe.Problem = "invalid JSON: " + err.Error()
	return pe
}

// jsonKind names a Go kind the way a JSON author would.
func jsonKind(goKind string) string {
	switch goKind {
	case "struct", "map", "ptr":
		return "object"
	case "slice", "array":
		return "array"
	case "bool":
		return "boolean"
	case "string":
		return "string"
	}
	return goKind
}

// missing builds the error for an absent required field.
func missing(host Host, event, field string) error {
	return &PayloadError{Host: host, Event: event, Field: field, Problem: "missing"}
}

// invalid builds the error for a malformed field.
func invalid(host Host, event, field, problem string) error {
	return &PayloadError{Host: host, Event: event, Field: field, Problem: problem}
}

// isSHA reports whether s is a full hex object name (SHA-1 or SHA-256).
func isSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// isZeroSHA reports whether s is an all-zero object name.
func isZeroSHA(s string) bool {
	return s != "" && strings.Trim(s, "0") == ""
}

// checkSHA validates a required commit SHA field and returns it in lower case.
func checkSHA(host Host, event, field string, v *string) (string, error) {
	if v == nil {
		return "", missing(host, event, field)
	}
	if !isSHA(*v) {
		return "", invalid(host, event, field, quote(*v)+" is not a commit SHA")
	}
	return strings.ToLower(*v), nil
}

// clip shortens a value quoted in an error message.
func clip(s string) string {
	const limit = 80
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// checkRef validates a full ref name with the rules of git check-ref-format.
func checkRef(host Host, event, field string, v *string) (string, error) {
	if v == nil {
		return "", missing(host, event, field)
	}
	if problem := refProblem(*v); problem != "" {
		return "", invalid(host, event, field, quote(*v)+" "+problem)
	}
	return *v, nil
}

// refProblem returns why name is not a valid full git ref, or "".
func refProblem(name string) string {
	switch {
	case name == "":
		return "is empty"
	case !strings.HasPrefix(name, "refs/"):
		return "does not start with refs/"
	case strings.HasSuffix(name, "/"), strings.HasSuffix(name, "."), strings.HasSuffix(name, ".lock"):
		return "has a bad ending"
	case strings.Contains(name, ".."), strings.Contains(name, "//"), strings.Contains(name, "@{"),
		strings.Contains(name, "/."), strings.Contains(name, ".lock/"):
		return "has a forbidden sequence"
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return fmt.Sprintf("has forbidden character %q", r)
		}
	}
	return ""
}

// splitRef fills Branch or Tag from Ref. It reports false for refs that are
// neither (refs/notes/..., refs/pull/...).
func splitRef(p *Push) bool {
	if name, ok := strings.CutPrefix(p.Ref, "refs/heads/"); ok && name != "" {
		p.Branch = name
		return true
	}
	if name, ok := strings.CutPrefix(p.Ref, "refs/tags/"); ok && name != "" {
		p.Tag = name
		return true
	}
	return false
}

// nonEmpty validates a required string field that must not be empty.
func nonEmpty(host Host, event, field string, v *string) (string, error) {
	if v == nil {
		return "", missing(host, event, field)
	}
	if strings.TrimSpace(*v) == "" {
		return "", invalid(host, event, field, "is empty")
	}
	return *v, nil
}

// headCommit records the head commit the host sent. For an annotated tag
// "after" names the tag object and the head commit is the commit it points
// at, which is what gets built; for a branch the head commit is "after".
func headCommit(p *Push, id, message string) {
	if p.Tag != "" {
		p.After = id
	}
	if id == p.After {
		p.HeadMessage = message
	}
}

// missingEventHeader builds the error for a request without an event header.
func missingEventHeader(host Host, names string) error {
	return fmt.Errorf("%w: %s request has no %s header", ErrUnsupportedEvent, host, names)
}

// quote quotes a payload value for an error message, shortening long ones.
func quote(s string) string {
	return fmt.Sprintf("%q", clip(s))
}
