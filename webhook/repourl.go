package webhook

import "strings"

// RepoURLs returns the distinct, non-empty URLs of the pushed repository
// (clone URL, SSH URL, web URL, in that order), for matching against an
// agent's git source with NormalizeRepoURL.
func RepoURLs(p Push) []string {
	var urls []string
	for _, u := range []string{p.Repository.CloneURL, p.Repository.SSHURL, p.Repository.WebURL} {
		if u == "" || contains(urls, u) {
			continue
		}
		urls = append(urls, u)
	}
	return urls
}

// contains reports whether list holds s.
func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// NormalizeRepoURL reduces a repository URL to "host/path" for matching:
// the scheme, user info, port, query and fragment are dropped, the host is
// lower-cased, the scp-like form user@host:path is understood, repeated
// slashes and spaces around path segments are dropped and trailing "/" and
// ".git" are removed. The path
// keeps its case (it is shown to users); a caller matching two results
// compares them ignoring case, since hosts are case-insensitive and so are
// the paths of GitHub, GitLab and Gitea (registry.Sources.FindByRepoURL). So https://github.com/Acme/Repo.git,
// git@github.com:Acme/Repo.git and ssh://git@github.com:22/Acme/Repo/ all
// become github.com/Acme/Repo.
//
// It returns "" when no host can be found (empty input, file:// URLs, local
// paths); callers must not treat two "" results as a match. The result is
// stable: NormalizeRepoURL(NormalizeRepoURL(u)) == NormalizeRepoURL(u).
func NormalizeRepoURL(u string) string {
	s := u
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimSpace(s)
	var host, path string
	if i := strings.Index(s, "://"); i >= 0 {
		// scheme://[user@]host[:port]/path
		rest := s[i+3:]
		authority, p, _ := strings.Cut(rest, "/")
		host, path = hostOf(authority), p
		if port := portOf(authority); port != "" && strings.Trim(port, "0123456789") != "" {
			// ssh://git@host:owner/repo mixes the two syntaxes; git
			// rejects it, but the intent is plain.
			path = port + "/" + path
		}
	} else {
		host, path = splitSCP(s)
	}
	host = strings.ToLower(strings.TrimSpace(host))
	if host == "" {
		return ""
	}
	path = cleanRepoPath(path)
	if path == "" {
		return host
	}
	return host + "/" + path
}

// hostOf returns the host of an authority, without user info and port.
func hostOf(authority string) string {
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		authority = authority[at+1:]
	}
	if strings.HasPrefix(authority, "[") {
		// IPv6 literal: keep the brackets so the result stays unambiguous.
		if end := strings.Index(authority, "]"); end >= 0 {
			return authority[:end+1]
		}
		return ""
	}
	host, _, _ := strings.Cut(authority, ":")
	return host
}

// portOf returns what follows the host and ":" in an authority, or "".
func portOf(authority string) string {
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		authority = authority[at+1:]
	}
	if strings.HasPrefix(authority, "[") {
		end := strings.Index(authority, "]")
		if end < 0 {
			return ""
		}
		authority = authority[end+1:]
	}
	_, port, _ := strings.Cut(authority, ":")
	return port
}

// splitSCP splits a URL without a scheme: the scp-like [user@]host:path
// that git accepts, or a bare host/path (the normalised form itself).
func splitSCP(s string) (host, path string) {
	// User info ends at the last "@" before the path starts.
	slash := strings.Index(s, "/")
	head := s
	if slash >= 0 {
		head = s[:slash]
	}
	if at := strings.LastIndex(head, "@"); at >= 0 {
		s = s[at+1:]
	}
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return "", ""
		}
		host, rest := s[:end+1], s[end+1:]
		rest = strings.TrimPrefix(rest, ":")
		return host, rest
	}
	colon := strings.Index(s, ":")
	slash = strings.Index(s, "/")
	if colon >= 0 && (slash < 0 || colon < slash) {
		return s[:colon], s[colon+1:]
	}
	if slash < 0 {
		return s, ""
	}
	return s[:slash], s[slash+1:]
}

// cleanRepoPath trims spaces around path segments, drops empty ones (so
// repeated, leading and trailing slashes go) and strips ".git" suffixes.
func cleanRepoPath(path string) string {
	parts := strings.Split(path, "/")
	kept := parts[:0]
	for _, part := range parts {
		if part = strings.TrimSpace(part); part != "" {
			kept = append(kept, part)
		}
	}
	for len(kept) > 0 {
		last := kept[len(kept)-1]
		trimmed := strings.TrimSpace(strings.TrimSuffix(last, ".git"))
		if trimmed == last {
			break
		}
		if trimmed == "" {
			kept = kept[:len(kept)-1]
			continue
		}
		kept[len(kept)-1] = trimmed
	}
	return strings.Join(kept, "/")
}
