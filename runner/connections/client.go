package connections

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"svc/agent"
)

// DefaultTimeout bounds one request (dial, headers and body) when Options.Timeout is 0.
const DefaultTimeout = 30 * time.Second

// maxRequestBody bounds the JSON body of a request.
const maxRequestBody = 1 << 20

// ErrNoTestPath is returned by Check for a connection whose spec.json has no testPath.
var ErrNoTestPath = errors.New("connections: no testPath to check")

// SecretFunc resolves the variable NAME of an "env:NAME" reference: ok is false when it is not
// set. The caller decides where values come from (the agent's secrets first, then the
// process environment). It is called for every request, so that a rotated secret applies at
// once; it must be safe for concurrent use.
type SecretFunc func(ctx context.Context, name string) (value string, ok bool, err error)

// Options configure a Client. The zero value works: no secrets (every env: reference is
// unset), http.DefaultTransport's settings, the system resolver, time.Now, slog.Default(),
// metadata addresses refused, and DefaultTimeout.
type Options struct {
	// Secret resolves env: references of base URLs and auth blocks.
	Secret SecretFunc
	// Transport, when set, is cloned as the base of the Client's transport (TLS settings,
	// pool sizes). Its Proxy, DialContext and DialTLSContext are replaced: requests go straight
	// to the checked address of the connection's host, never through a proxy from the
	// environment. (An *http.Client is not accepted, because its transport could dial anywhere.)
	Transport *http.Transport
	// Resolver resolves host names at dial time; nil is net.DefaultResolver. Tests map names
	// such as metadata.test to addresses with it.
	Resolver Resolver
	// Now is the clock of the rate limits; nil is time.Now.
	Now func() time.Time
	// Logger receives one line per request (never a secret); nil is slog.Default().
	Logger *slog.Logger
	// AllowMetadata lets requests reach link-local and cloud metadata addresses and names
	// (the setting EnvAllowMetadata).
	AllowMetadata bool
	// Timeout bounds one request; 0 is DefaultTimeout.
	Timeout time.Duration
	// Hint says how to set a variable that is not set, for the error of a request that needs
	// it: "set it with `svc secrets set my-agent NAME` or in the runner's environment". nil
	// says "set it as an agent secret or in the runtime's environment".
	Hint func(name string) string
	// ToolsChanged, when set, is called with an mcp connection's name when its tools may have
	// changed: the server sent notifications/tools/list_changed, or a listing found other tools
	// than the last one (the first successful listing included). It is called from any
	// goroutine, sometimes with the connection's lock held: it must not block nor call back into
	// the Client; hand the work to another goroutine.
	ToolsChanged func(connection string)
}

// Client holds the connections of one agent with what their requests share: the checked
// transport and the rate limits. Build one per agent (not per named agent or session) so that
// a connection's rate limit is one budget; hand out Tools for the connections each named agent
// may use. It is safe for concurrent use.
type Client struct {
	opts  Options
	log   *slog.Logger
	conns map[string]*conn
	names []string
	tr    *http.Transport
	http  *http.Client
}

// conn is one connection, compiled.
type conn struct {
	def    *agent.Connection
	base   *url.URL // the literal base URL, parsed; nil when it is an env: reference
	rules  *rules
	hidden *hidden
	limit  *bucket // nil without a rate limit
	// mcp is the session and tool list of a connection of format mcp (nil for rest); its
	// rules are toolRules, not rules.
	mcp       *mcpSource
	toolRules *toolRules
	// red caches the redactor of the last auth values: building one costs more than a request's
	// other checks, and the values change only when a secret rotates or a template's context does.
	red atomic.Pointer[cachedRedactor]
}

type cachedRedactor struct {
	key string // the auth values, joined by NUL
	r   *redactor
}

// redactor returns the redactor of secrets, reusing the last one when they are the same.
func (cn *conn) redactor(secrets []string) *redactor {
	key := strings.Join(secrets, "\x00")
	if c := cn.red.Load(); c != nil && c.key == key {
		return c.r
	}
	r := newRedactor(secrets)
	cn.red.Store(&cachedRedactor{key: key, r: r})
	return r
}

// New compiles conns (their rules, hidden fields and rate limits) and builds the transport.
// Every problem is an error naming the connection and the file or field.
func New(conns []*agent.Connection, opts Options) (*Client, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	c := &Client{opts: opts, log: opts.Logger, conns: make(map[string]*conn, len(conns))}
	if c.log == nil {
		c.log = slog.Default()
	}
	var errs []error
	for _, def := range conns {
		if def == nil {
			continue
		}
		if _, dup := c.conns[def.Name]; dup || def.Name == "" {
			errs = append(errs, fmt.Errorf("connection %q: empty or repeated name", def.Name))
			continue
		}
		cn, err := compileConn(def, opts.AllowMetadata)
		if err != nil {
			errs = append(errs, fmt.Errorf("connection %s: %w", def.Name, err))
			continue
		}
		if cn.toolRules != nil {
			cn.mcp = &mcpSource{c: c, cn: cn}
		}
		c.conns[def.Name] = cn
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	c.names = slices.Sorted(maps.Keys(c.conns))

	base := opts.Transport
	if base == nil {
		base = http.DefaultTransport.(*http.Transport)
	}
	c.tr = base.Clone()
	c.tr.Proxy = nil
	c.tr.DialContext = newDialer(opts.Resolver, opts.AllowMetadata).DialContext
	c.tr.DialTLSContext = nil
	c.tr.MaxResponseHeaderBytes = 1 << 20
	c.http = &http.Client{
		Transport: c.tr,
		// Redirects are never followed: the 3xx comes back with its Location header, and a
		// request to that place, if the rules allow it, is the model's next call.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c, nil
}

func compileConn(def *agent.Connection, allowMetadata bool) (*conn, error) {
	cn := &conn{def: def}
	mcpFormat := def.Spec.Format == agent.FormatMCP
	if def.Spec.Format != "" && def.Spec.Format != agent.FormatREST && !mcpFormat {
		return nil, fmt.Errorf("spec.json: format must be \"rest\" or \"mcp\", got %q", def.Spec.Format)
	}
	if !strings.HasPrefix(def.Spec.BaseURL, agent.EnvPrefix) {
		u, err := checkBaseURL(def.Spec.BaseURL, allowMetadata)
		if err != nil {
			return nil, err
		}
		cn.base = u
	} else if _, ok := agent.ParseEnvRef(def.Spec.BaseURL); !ok {
		return nil, fmt.Errorf("spec.json: baseUrl %q is not a valid env: reference", def.Spec.BaseURL)
	}
	if a := def.Spec.Auth; a != nil {
		for _, part := range []struct {
			field string
			m     map[string]string
		}{{"auth.headers", a.Headers}, {"auth.query", a.Query}} {
			for k, v := range part.m {
				if k == "" {
					return nil, fmt.Errorf("spec.json: %s: empty name", part.field)
				}
				if strings.HasPrefix(v, agent.EnvPrefix) {
					if _, ok := agent.ParseEnvRef(v); !ok {
						return nil, fmt.Errorf("spec.json: %s.%s is not a valid env: reference", part.field, k)
					}
				}
			}
		}
	}
	if mcpFormat {
		tr, err := compileToolRules(def)
		if err != nil {
			return nil, err
		}
		cn.toolRules = tr
	} else {
		rs, err := compileConnRules(def)
		if err != nil {
			return nil, err
		}
		cn.rules = rs
	}
	if a := def.Access; a != nil {
		cn.hidden = newHidden(a.Hidden)
		if r := a.RateLimit; r != nil {
			if r.RequestsPerMinute <= 0 || r.Burst < 0 {
				return nil, fmt.Errorf("access.json: rateLimit needs requestsPerMinute > 0 and burst >= 0, got %d and %d", r.RequestsPerMinute, r.Burst)
			}
			cn.limit = newBucket(r.RequestsPerMinute, r.Burst)
		}
	}
	return cn, nil
}

// checkBaseURL parses and checks a base URL (literal, or an env: reference's value).
func checkBaseURL(raw string, allowMetadata bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, errors.New("baseUrl is not a URL") // the parser's message would repeat the value
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.Hostname() == "":
		return nil, errors.New("baseUrl must be an absolute http(s) URL with a host")
	case u.User != nil:
		return nil, errors.New("baseUrl must not hold credentials (user:password@); use the auth block of spec.json")
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return nil, errors.New("baseUrl must not have a query or fragment; use the auth block for credentials")
	}
	if err := checkHost(u.Hostname(), allowMetadata); err != nil {
		return nil, fmt.Errorf("baseUrl: %w", err)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = strings.TrimSuffix(u.RawPath, "/")
	return u, nil
}

// Names returns the names of the client's connections, sorted.
func (c *Client) Names() []string { return slices.Clone(c.names) }

// RESTNames returns the names of the client's connections of format rest (those the request
// tool reaches), sorted.
func (c *Client) RESTNames() []string {
	return slices.DeleteFunc(slices.Clone(c.names), c.IsMCP)
}

// Close closes the sessions of mcp connections and the idle connections of the transport. The
// Client stays usable (an mcp connection opens another session at its next use).
func (c *Client) Close() {
	for _, n := range c.names {
		if s := c.conns[n].mcp; s != nil {
			s.close()
		}
	}
	c.tr.CloseIdleConnections()
}

// Check is the health probe of connection name (for /health): a GET of its testPath with its
// auth, through the same checks as a model's request but outside its rate limit. It returns
// nil for a status below 400, ErrNoTestPath when there is no testPath (unless a credential is
// too short: a *ShortCredentialError, checked with or without testPath), and otherwise an
// error without secrets. It makes one request per call: cache the answer.
func (c *Client) Check(ctx context.Context, name string) error {
	cn := c.conns[name]
	if cn == nil {
		return fmt.Errorf("connections: no connection %q", name)
	}
	if cn.mcp != nil {
		return c.checkMCP(ctx, cn)
	}
	if cn.def.Spec.TestPath == "" {
		if err := c.checkCredentials(ctx, cn); err != nil {
			return err
		}
		return ErrNoTestPath
	}
	rp, err := parsePath(cn.def.Spec.TestPath, nil)
	if err != nil {
		return fmt.Errorf("connection %s: testPath: %w", name, err)
	}
	resp, red, cancel, err := c.send(ctx, cn, http.MethodGet, rp, nil, nil, nil)
	if err != nil {
		return err
	}
	defer cancel()
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxBodyBytes)) // lets the connection be reused
	if resp.StatusCode >= 400 {
		return red.err(fmt.Errorf("connection %s: GET %s answered %s", name, rp.escaped, resp.Status))
	}
	return nil
}

// send resolves the connection's base URL and auth, builds the request and sends it. The
// caller closes the response body and then calls cancel. Errors are redacted.
func (c *Client) send(ctx context.Context, cn *conn, method string, rp reqPath, query url.Values, body []byte, sessionCtx map[string]string) (*http.Response, *redactor, context.CancelFunc, error) {
	name := cn.def.Name
	base := cn.base
	if base == nil {
		raw, err := c.resolve(ctx, "baseUrl", cn.def.Spec.BaseURL)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("connection %s: %w", name, err)
		}
		if base, err = checkBaseURL(raw, c.opts.AllowMetadata); err != nil {
			return nil, nil, nil, fmt.Errorf("connection %s: %s: %w", name, cn.def.Spec.BaseURL, err)
		}
	}
	q := url.Values{}
	for k, vs := range query {
		q[k] = vs
	}
	header := http.Header{}
	var secrets []string
	if a := cn.def.Spec.Auth; a != nil {
		for _, k := range slices.Sorted(maps.Keys(a.Headers)) {
			v, err := c.authValue(ctx, "auth.headers."+k, a.Headers[k], sessionCtx)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("connection %s: %w", name, err)
			}
			header.Set(k, v)
			secrets = append(secrets, v)
		}
		for _, k := range slices.Sorted(maps.Keys(a.Query)) {
			v, err := c.authValue(ctx, "auth.query."+k, a.Query[k], sessionCtx)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("connection %s: %w", name, err)
			}
			q.Set(k, v)
			secrets = append(secrets, v)
		}
	}
	red := cn.redactor(secrets)
	u := &url.URL{
		Scheme:   base.Scheme,
		Host:     base.Host,
		Path:     base.Path + strings.Join(append([]string{""}, rp.segs...), "/"),
		RawPath:  base.EscapedPath() + rp.escaped,
		RawQuery: q.Encode(),
	}
	if strings.HasSuffix(rp.escaped, "/") {
		u.Path += "/"
	}
	if u.Host != base.Host || u.Scheme != base.Scheme { // unreachable by construction; kept as the last word
		return nil, nil, nil, fmt.Errorf("%w: connection %s: the request left %s", ErrForbiddenAddress, name, base.Host)
	}
	port := base.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[base.Scheme]
	}
	rctx, cancel := context.WithTimeout(withAllowedHost(ctx, net.JoinHostPort(base.Hostname(), port)), c.opts.Timeout)
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(rctx, method, u.String(), rd)
	if err != nil {
		cancel()
		return nil, nil, nil, red.err(fmt.Errorf("connection %s: %s %s: %w", name, method, rp.escaped, err))
	}
	req.Header = header
	req.Header.Set("Accept", "application/json, text/plain;q=0.9, */*;q=0.5")
	req.Header.Set("User-Agent", "svc-connection")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		cancel()
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // its text holds the URL, with the auth query
		}
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("no answer within %s: %w", c.opts.Timeout, err)
		}
		return nil, nil, nil, red.err(fmt.Errorf("connection %s: %s %s: %w", name, method, rp.escaped, err))
	}
	return resp, red, cancel, nil
}

// resolve returns the value of an env: reference (or value itself when it is not one).
func (c *Client) resolve(ctx context.Context, field, value string) (string, error) {
	ref, ok := agent.ParseEnvRef(value)
	if !ok {
		return value, nil
	}
	var (
		v   string
		set bool
		err error
	)
	if c.opts.Secret != nil {
		v, set, err = c.opts.Secret(ctx, ref)
	}
	switch {
	case err != nil:
		return "", fmt.Errorf("%s: resolve %s: %w", field, value, err)
	case !set || v == "":
		how := "set it as an agent secret or in the runtime's environment"
		if c.opts.Hint != nil {
			how = c.opts.Hint(ref)
		}
		return "", fmt.Errorf("%s: %s is not set; %s", field, value, how)
	}
	return v, nil
}

// authValue resolves one auth value and fills its {{context.KEY}} templates. Its errors never
// hold the value.
func (c *Client) authValue(ctx context.Context, field, ref string, sessionCtx map[string]string) (string, error) {
	v, err := c.resolve(ctx, field, ref)
	if err != nil {
		return "", err
	}
	// A value without templates is the author's secret alone: too short, it cannot be redacted
	// safely. One with {{context.KEY}} holds the chat's own data, which the caller knows.
	if !hasContextTemplate(v) {
		if err := checkCredentialLen(field, ref, v); err != nil {
			return "", err
		}
	}
	if v, err = fill(field, v, sessionCtx, nil); err != nil {
		return "", err
	}
	for _, r := range v {
		if r < 0x20 && r != '\t' || r == 0x7f {
			return "", fmt.Errorf("%s: the value of %s has a control character", field, ref)
		}
	}
	return v, nil
}

// checkCredentials resolves the connection's auth values without a chat's context and returns
// the first ShortCredentialError, for Check when there is no testPath to call. Other problems
// (an unset variable, a {{context.KEY}} only a chat can fill) show when a request is made.
func (c *Client) checkCredentials(ctx context.Context, cn *conn) error {
	a := cn.def.Spec.Auth
	if a == nil {
		return nil
	}
	for _, part := range []struct {
		field string
		m     map[string]string
	}{{"auth.headers.", a.Headers}, {"auth.query.", a.Query}} {
		for _, k := range slices.Sorted(maps.Keys(part.m)) {
			_, err := c.authValue(ctx, part.field+k, part.m[k], nil)
			if short := (*ShortCredentialError)(nil); errors.As(err, &short) {
				return fmt.Errorf("connection %s: %w", cn.def.Name, err)
			}
		}
	}
	return nil
}
