package connections

import (
	"fmt"
	"net/url"
	"strings"

	"svc/runner/tools"
)

// maxDecodeLevels is how many rounds of percent-decoding a path segment is checked through:
// a server (or a proxy in front of it) that decodes twice must not see a ".." either.
const maxDecodeLevels = 3

// maxPathBytes bounds a path (after its templates are filled), query string included.
const maxPathBytes = 4096

// reqPath is a checked request path, relative to a connection's base URL.
type reqPath struct {
	escaped string     // canonical escaped path starting with "/": each segment url.PathEscape'd
	segs    []string   // the decoded segments, matched against endpoint rules and sent as they are
	query   url.Values // parameters given after a "?" in the path
}

// pathError is a refused path: an argument error naming the rule.
func pathError(format string, args ...any) error {
	return fmt.Errorf("%w: path: %s", tools.ErrBadArguments, fmt.Sprintf(format, args...))
}

// parsePath checks the model's path and fills its {{context.KEY}} templates (values escaped as
// path segments). Refused, each with an error naming the rule: an absolute URL or any scheme,
// a "//host" start, backslashes, a fragment, control characters, empty segments, and "." or ".."
// segments — also percent-encoded (%2e%2e, %2E., ..%2f, through maxDecodeLevels rounds of
// decoding) and with ";params" after them ("..;", which some servers read as "..").
//
// The path's segments are decoded once for rule matching and re-encoded canonically for the
// request, so the server receives exactly the segments the rules saw: "%2F" inside a segment
// stays one segment, "%69ncidents" is the segment "incidents".
func parsePath(p string, context map[string]string) (reqPath, error) {
	if strings.TrimSpace(p) == "" {
		return reqPath{}, fmt.Errorf("%w: path: required, such as \"/items/42\"", tools.ErrBadArguments)
	}
	filled, err := fill("path", p, context, url.PathEscape)
	if err != nil {
		return reqPath{}, fmt.Errorf("%w: %w", tools.ErrBadArguments, err)
	}
	p = filled
	switch {
	case len(p) > maxPathBytes:
		return reqPath{}, pathError("%d bytes is over the limit of %d", len(p), maxPathBytes)
	case hasScheme(p):
		return reqPath{}, pathError("%q is an absolute URL or has a scheme; give the path relative to the connection's base URL, such as \"/items/42\" (rule: relative paths only)", p)
	case strings.HasPrefix(p, "//"):
		return reqPath{}, pathError("%q starts with \"//\", which names a host (rule: no host change)", p)
	case strings.Contains(p, `\`):
		return reqPath{}, pathError("%q has a backslash (rule: no backslashes)", p)
	case strings.Contains(p, "#"):
		return reqPath{}, pathError("%q has a fragment (#), which is never sent; remove it", p)
	}
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	raw, rawQuery, _ := strings.Cut(p, "?")
	var rp reqPath
	if rawQuery != "" {
		q, err := url.ParseQuery(rawQuery)
		if err != nil {
			return reqPath{}, pathError("bad query after \"?\": %v", err)
		}
		rp.query = q
	}
	if i := strings.IndexFunc(raw, isControl); i >= 0 {
		return reqPath{}, pathError("control character %q at byte %d (rule: printable paths only)", raw[i], i)
	}
	trimmed := strings.TrimPrefix(raw, "/")
	trailing := strings.HasSuffix(trimmed, "/")
	trimmed = strings.TrimSuffix(trimmed, "/")
	var b strings.Builder
	if trimmed != "" {
		for _, seg := range strings.Split(trimmed, "/") {
			dec, err := checkSegment(seg)
			if err != nil {
				return reqPath{}, err
			}
			rp.segs = append(rp.segs, dec)
			b.WriteByte('/')
			b.WriteString(url.PathEscape(dec))
		}
	}
	if trailing || b.Len() == 0 {
		b.WriteByte('/')
	}
	rp.escaped = b.String()
	return rp, nil
}

// checkSegment checks one raw segment through every round of decoding and returns it decoded once.
func checkSegment(seg string) (string, error) {
	if seg == "" {
		return "", pathError("empty segment (\"//\") (rule: no empty segments)")
	}
	once, err := url.PathUnescape(seg)
	if err != nil {
		return "", pathError("segment %q: bad percent-encoding", seg)
	}
	cur := seg
	for level := 0; ; level++ {
		if strings.Contains(cur, `\`) {
			return "", pathError("segment %q decodes to a backslash (rule: no backslashes)", seg)
		}
		if strings.IndexFunc(cur, isControl) >= 0 {
			return "", pathError("segment %q decodes to a control character (rule: printable paths only)", seg)
		}
		for _, piece := range strings.Split(cur, "/") {
			name, _, _ := strings.Cut(piece, ";")
			switch {
			case name == "." || name == "..":
				return "", pathError("segment %q is or decodes to %q (rule: no dot segments)", seg, name)
			case piece == "":
				return "", pathError("segment %q decodes to an empty segment (rule: no empty segments)", seg)
			}
		}
		if level == maxDecodeLevels || !strings.Contains(cur, "%") {
			return once, nil
		}
		dec, err := url.PathUnescape(cur)
		if err != nil {
			return once, nil // a literal '%' left after decoding: nothing more to decode
		}
		cur = dec
	}
}

// hasScheme reports whether s starts with "scheme:" (RFC 3986: a letter, then letters, digits, + - .).
func hasScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return true
		default:
			return false
		}
	}
	return false
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }
