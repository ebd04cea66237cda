package agent

import (
	"fmt"
	"net/url"
	"strings"
)

// EnvPrefix starts a reference to a secret or setting that is resolved at run time, never in source.
const EnvPrefix = "env:"

// ParseEnvRef returns NAME for a value "env:NAME" with NAME matching [A-Z_][A-Z0-9_]*;
// ok is false for any other value.
func ParseEnvRef(value string) (name string, ok bool) {
	name, found := strings.CutPrefix(value, EnvPrefix)
	if !found || !validEnvName(name) {
		return "", false
	}
	return name, true
}

func validEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		switch {
		case r == '_' || r >= 'A' && r <= 'Z':
		case i > 0 && r >= '0' && r <= '9':
		default:
			return false
		}
	}
	return true
}

// checkEnvRef returns a problem message when value is not a valid env: reference, else "".
func checkEnvRef(field, value string) string {
	name, found := strings.CutPrefix(value, EnvPrefix)
	if !found {
		return fmt.Sprintf("field %q must be an env: reference such as \"env:NAME\"; secrets do not belong in source", field)
	}
	if !validEnvName(name) {
		return fmt.Sprintf("field %q: invalid variable name %q in env: reference (want [A-Z_][A-Z0-9_]*)", field, name)
	}
	return ""
}

// checkBaseURL returns a problem message when value is neither an absolute http(s) URL nor a valid
// env: reference, else "".
func checkBaseURL(field, value string) string {
	if strings.HasPrefix(value, EnvPrefix) {
		return checkEnvRef(field, value)
	}
	u, err := url.Parse(value)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Sprintf("field %q must be an absolute http(s) URL or an env: reference, got %q", field, value)
	}
	return ""
}

// maxNameLength bounds the names of tools, stores, connections, agents and knowledge documents:
// model APIs accept tool names of at most 64 characters.
const maxNameLength = 64

// checkName returns a problem message when name is not usable as the name of kind
// (letters, digits, '_' and '-', starting with a letter or digit, at most 64 characters), else "".
func checkName(kind, name string) string {
	ok := name != "" && len(name) <= maxNameLength
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case i > 0 && (r == '_' || r == '-'):
		default:
			ok = false
		}
	}
	if !ok {
		return fmt.Sprintf("invalid %s name %q: use letters, digits, '_' and '-' (at most %d, starting with a letter or digit)", kind, name, maxNameLength)
	}
	return ""
}
