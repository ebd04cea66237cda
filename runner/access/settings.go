package access

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
)

// Default claim names of OIDCSettings.
const (
	DefaultUserClaim  = "sub"
	DefaultEmailClaim = "email"
)

// Settings are an agent's access settings, the body of GET|PUT /api/agents/{id}/access
// (CONTRACT §8). Build them with ParseSettings, or fill them in code and call Validate.
type Settings struct {
	OIDC          *OIDCSettings `json:"oidc"`
	Allow         AllowRules    `json:"allow"`
	Collaborators []string      `json:"collaborators,omitempty"`
}

// OIDCSettings name the agent's OpenID provider and how its tokens map to an Identity.
type OIDCSettings struct {
	// Issuer is the provider's issuer URL, equal to the iss of its tokens: https, or http on
	// 127.0.0.1, [::1] or localhost only.
	Issuer string `json:"issuer"`
	// ClientID is the agent's client at the provider; ID tokens must name it in aud.
	ClientID string `json:"clientId"`
	// ClientSecret is "env:NAME": the secret is read from the agent's environment variable NAME.
	// "" for a public client (PKCE only).
	ClientSecret string `json:"clientSecret,omitempty"`
	// Audiences are the aud values a bearer token may carry; default: [ClientID].
	Audiences []string `json:"audiences,omitempty"`
	// UserClaim names the claim holding the user id; default "sub".
	UserClaim string `json:"userClaim,omitempty"`
	// EmailClaim names the claim holding the e-mail; default "email".
	EmailClaim string `json:"emailClaim,omitempty"`
	// OrgClaim names the claim holding the organization (svc.user.org_id); "" for none.
	OrgClaim string `json:"orgClaim,omitempty"`
	// GroupsClaim names the claim holding the user's groups (a string or a list); "" for none.
	GroupsClaim string `json:"groupsClaim,omitempty"`
}

// AllowRules admit signed-in users: one who matches any rule is admitted.
type AllowRules struct {
	Emails  []string `json:"emails,omitempty"`  // exact e-mails, case-insensitive
	Domains []string `json:"domains,omitempty"` // the e-mail's domain, exact and case-insensitive (no subdomains)
	Groups  []string `json:"groups,omitempty"`  // any of the user's groups, exact
	Orgs    []string `json:"orgs,omitempty"`    // the user's organization, exact
}

// FieldError is a setting that is wrong, named by its JSON path (oidc.issuer, allow.emails[2]).
type FieldError struct {
	Field   string
	Message string
}

// Error implements error.
func (e *FieldError) Error() string { return e.Field + " " + e.Message }

// ParseSettings decodes access settings strictly (an unknown field is an error naming it), fills
// the default claim names, and validates them.
func ParseSettings(data []byte) (*Settings, error) {
	if err := checkFields(data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Settings
	if err := dec.Decode(&s); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return nil, &FieldError{Field: typeErr.Field, Message: "must be " + jsonKind(typeErr.Type.Kind()) + ", got " + typeErr.Value}
		}
		return nil, fmt.Errorf("access settings: %w", err)
	}
	if dec.More() {
		return nil, errors.New("access settings: one JSON object expected")
	}
	if s.OIDC != nil {
		if s.OIDC.UserClaim == "" {
			s.OIDC.UserClaim = DefaultUserClaim
		}
		if s.OIDC.EmailClaim == "" {
			s.OIDC.EmailClaim = DefaultEmailClaim
		}
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// jsonKind names a Go kind as JSON does.
func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map, reflect.Pointer:
		return "an object"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	default:
		return "a number"
	}
}

// knownFields are the fields of each object of the settings, by path.
var knownFields = map[string][]string{
	"":      {"oidc", "allow", "collaborators"},
	"oidc":  {"issuer", "clientId", "clientSecret", "audiences", "userClaim", "emailClaim", "orgClaim", "groupsClaim"},
	"allow": {"emails", "domains", "groups", "orgs"},
}

// checkFields names the first unknown field with its path, which encoding/json does not.
func checkFields(data []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return fmt.Errorf("access settings: must be a JSON object: %w", err)
	}
	for _, path := range []string{"", "oidc", "allow"} {
		obj := top
		if path != "" {
			raw, ok := top[path]
			if !ok || string(raw) == "null" {
				continue
			}
			obj = nil
			if err := json.Unmarshal(raw, &obj); err != nil {
				return &FieldError{Field: path, Message: "must be a JSON object"}
			}
		}
		for _, k := range sortedKeys(obj) {
			if !slices.Contains(knownFields[path], k) {
				name := k
				if path != "" {
					name = path + "." + k
				}
				return &FieldError{Field: name, Message: "is not a known field (known: " + strings.Join(knownFields[path], ", ") + ")"}
			}
		}
	}
	return nil
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

var (
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	domainRE  = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$`)
)

// Validate checks s and returns every problem, each a *FieldError naming its field, joined.
// The allow rules and collaborators must admit someone: empty, they would admit nobody.
func (s *Settings) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if o := s.OIDC; o == nil {
		bad("oidc", "is required")
	} else {
		if err := checkIssuer(o.Issuer); err != "" {
			bad("oidc.issuer", "%s", err)
		}
		if strings.TrimSpace(o.ClientID) == "" {
			bad("oidc.clientId", "is required")
		}
		if o.ClientSecret != "" {
			name, ok := strings.CutPrefix(o.ClientSecret, "env:")
			if !ok || !envNameRE.MatchString(name) {
				bad("oidc.clientSecret", `must be "env:NAME", the name of the agent's environment variable holding the secret`)
			}
		}
		for i, a := range o.Audiences {
			if strings.TrimSpace(a) == "" {
				bad(fmt.Sprintf("oidc.audiences[%d]", i), "must not be empty")
			}
		}
		for _, c := range []struct{ field, value string }{
			{"oidc.userClaim", o.UserClaim}, {"oidc.emailClaim", o.EmailClaim},
			{"oidc.orgClaim", o.OrgClaim}, {"oidc.groupsClaim", o.GroupsClaim},
		} {
			if c.value != strings.TrimSpace(c.value) {
				bad(c.field, "must not have surrounding spaces, got %q", c.value)
			}
		}
	}
	for i, e := range s.Allow.Emails {
		if !isEmail(e) {
			bad(fmt.Sprintf("allow.emails[%d]", i), "must be an e-mail address, got %q", e)
		}
	}
	for i, d := range s.Allow.Domains {
		if !domainRE.MatchString(strings.ToLower(d)) {
			bad(fmt.Sprintf("allow.domains[%d]", i), "must be a domain name such as example.com, got %q", d)
		}
	}
	for i, g := range s.Allow.Groups {
		if strings.TrimSpace(g) == "" {
			bad(fmt.Sprintf("allow.groups[%d]", i), "must not be empty")
		}
	}
	for i, o := range s.Allow.Orgs {
		if strings.TrimSpace(o) == "" {
			bad(fmt.Sprintf("allow.orgs[%d]", i), "must not be empty")
		}
	}
	for i, e := range s.Collaborators {
		if !isEmail(e) {
			bad(fmt.Sprintf("collaborators[%d]", i), "must be an e-mail address, got %q", e)
		}
	}
	a := s.Allow
	if len(a.Emails)+len(a.Domains)+len(a.Groups)+len(a.Orgs)+len(s.Collaborators) == 0 {
		bad("allow", "must name at least one of emails, domains, groups, orgs, or a collaborator: empty, it admits nobody")
	}
	return errors.Join(errs...)
}

// checkIssuer says what is wrong with an issuer URL, "" when nothing is.
func checkIssuer(issuer string) string {
	if issuer == "" {
		return "is required"
	}
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Sprintf("must be an https URL without query or fragment, got %q", issuer)
	}
	switch u.Scheme {
	case "https":
		return ""
	case "http":
		if h := u.Hostname(); h == "localhost" || (net.ParseIP(h) != nil && net.ParseIP(h).IsLoopback()) {
			return ""
		}
		return fmt.Sprintf("must be an https URL (http only on 127.0.0.1 or localhost), got %q", issuer)
	default:
		return fmt.Sprintf("must be an https URL, got %q", issuer)
	}
}

// isEmail is a loose check of an e-mail address: one @ with text on both sides, no spaces.
func isEmail(s string) bool {
	local, domain, ok := strings.Cut(s, "@")
	return ok && local != "" && domain != "" && !strings.Contains(domain, "@") && !strings.ContainsAny(s, " \t\r\n<>,")
}

// ClientSecretEnv is the name of the environment variable holding the client secret, "" for a
// public client.
func (s *Settings) ClientSecretEnv() string {
	if s.OIDC == nil {
		return ""
	}
	name, _ := strings.CutPrefix(s.OIDC.ClientSecret, "env:")
	return name
}

// audiences are the aud values a bearer token may carry.
func (o *OIDCSettings) audiences() []string {
	if len(o.Audiences) == 0 {
		return []string{o.ClientID}
	}
	return o.Audiences
}

func (o *OIDCSettings) userClaim() string  { return cmpOr(o.UserClaim, DefaultUserClaim) }
func (o *OIDCSettings) emailClaim() string { return cmpOr(o.EmailClaim, DefaultEmailClaim) }

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Admits reports whether u passes the allow rules or is a collaborator: whether the user may sign
// in and use the agent. E-mail and domain rules (and collaborators) apply only to a verified e-mail.
// (The method is not named Allow, the field holding the rules.)
func (s *Settings) Admits(u User) bool {
	return s.allowRules(u) || s.collaborator(u)
}

func (s *Settings) allowRules(u User) bool {
	a := s.Allow
	if u.Email != "" && u.EmailVerified {
		if slices.ContainsFunc(a.Emails, func(e string) bool { return strings.EqualFold(e, u.Email) }) {
			return true
		}
		if at := strings.LastIndexByte(u.Email, '@'); at >= 0 {
			domain := u.Email[at+1:]
			if slices.ContainsFunc(a.Domains, func(d string) bool { return strings.EqualFold(d, domain) }) {
				return true
			}
		}
	}
	if u.OrgID != "" && slices.Contains(a.Orgs, u.OrgID) {
		return true
	}
	return slices.ContainsFunc(u.Groups, func(g string) bool { return slices.Contains(a.Groups, g) })
}

func (s *Settings) collaborator(u User) bool {
	return u.Email != "" && u.EmailVerified &&
		slices.ContainsFunc(s.Collaborators, func(e string) bool { return strings.EqualFold(e, u.Email) })
}

// ShowsEmail reports whether u's e-mail may appear as owner_email in the platform's session and
// feedback lists: while u passes the allow rules or is a collaborator (CONTRACT §8).
func (s *Settings) ShowsEmail(u User) bool {
	return u.Email != "" && s.Admits(u)
}
