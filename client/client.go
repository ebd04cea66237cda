package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// maxJSONResponse bounds the body of a JSON answer the client decodes.
const maxJSONResponse = 32 << 20

// Client calls the platform API with one automation token. It is safe for concurrent use.
type Client struct {
	base     *url.URL
	token    string
	http     *http.Client
	agents   *http.Client // for agent URLs: dials the platform's address (see ChatStream)
	dialAddr string       // host:port of the platform
}

// New returns a client of the platform at baseURL (for example http://127.0.0.1:8080) that sends
// token as its bearer. A nil httpClient means a fresh client with the default transport settings
// and no overall timeout (log follows and chat streams are bounded by ctx instead). It panics only
// on a baseURL that is not an absolute http(s) URL, a programmer error; use ParseBaseURL to check
// user input first.
func New(baseURL, token string, httpClient *http.Client) *Client {
	u, err := ParseBaseURL(baseURL)
	if err != nil {
		panic(err)
	}
	if httpClient == nil {
		httpClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	c := &Client{base: u, token: token, http: httpClient, dialAddr: hostPort(u)}
	c.agents = agentClient(httpClient, c.dialAddr)
	return c
}

// ParseBaseURL checks that raw is an absolute http or https URL with a host and no query, and
// returns it without a trailing slash.
func ParseBaseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, fmt.Errorf("platform URL %q: %w", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("platform URL %q: want http(s)://host[:port]", raw)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// CloseIdleConnections closes the idle connections of the client's transports.
func (c *Client) CloseIdleConnections() {
	c.http.CloseIdleConnections()
	c.agents.CloseIdleConnections()
}

// BaseURL returns the platform's URL, without a trailing slash.
func (c *Client) BaseURL() string { return c.base.String() }

// hostPort returns u's host:port, with the scheme's default port when u has none.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// endpoint joins the platform's URL with the path built from segments: literal parts are kept,
// and each %s argument is path-escaped.
func (c *Client) endpoint(format string, ids ...string) string {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = url.PathEscape(id)
	}
	return c.base.String() + fmt.Sprintf(format, args...)
}

// newRequest builds a platform request with the bearer token; body, when not nil, is sent as JSON.
func (c *Client) newRequest(ctx context.Context, method, target string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// send runs req and returns the response when its status is 2xx; any other answer becomes a
// *Error (and the body is closed).
func (c *Client) send(req *http.Request) (*http.Response, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close() //nolint:errcheck // the body was read for the error; a close error adds nothing
		return nil, responseError(resp)
	}
	return resp, nil
}

// do sends a JSON request and decodes a JSON answer into out (when out is not nil).
func (c *Client) do(ctx context.Context, method, target string, body, out any) error {
	req, err := c.newRequest(ctx, method, target, body)
	if err != nil {
		return err
	}
	resp, err := c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close() //nolint:errcheck // read-only body
	return decodeBody(resp, out)
}

// decodeBody decodes resp's JSON body into out; out nil discards the body.
func decodeBody(resp *http.Response, out any) error {
	if out == nil {
		_, err := io.Copy(io.Discard, io.LimitReader(resp.Body, maxJSONResponse))
		if err != nil {
			return fmt.Errorf("read answer of %s: %w", resp.Request.URL.Path, err)
		}
		return nil
	}
	dec := json.NewDecoder(io.LimitReader(resp.Body, maxJSONResponse))
	if err := dec.Decode(out); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("decode answer of %s: empty body", resp.Request.URL.Path)
		}
		return fmt.Errorf("decode answer of %s: %w", resp.Request.URL.Path, err)
	}
	return nil
}

// decodeList decodes either a bare JSON array or an object holding the array under key.
func decodeList[T any](raw json.RawMessage, key string) ([]T, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var out []T
		if err := json.Unmarshal(trimmed, &out); err != nil {
			return nil, fmt.Errorf("decode %s: %w", key, err)
		}
		return out, nil
	}
	var wrapped map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &wrapped); err != nil {
		return nil, fmt.Errorf("decode %s: want an array or an object with %q: %w", key, key, err)
	}
	inner, ok := wrapped[key]
	if !ok {
		return nil, fmt.Errorf("decode %s: the object has no %q field", key, key)
	}
	var out []T
	if err := json.Unmarshal(inner, &out); err != nil {
		return nil, fmt.Errorf("decode %s: %w", key, err)
	}
	return out, nil
}
