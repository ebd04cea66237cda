package connections

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
)

// mcpTransport is the http.RoundTripper of an mcp connection's session: every request goes
// through the Client's checked transport (no proxy, the SSRF-refusing dialer) to the one host
// and port of the connection's base URL, with its auth headers resolved at that moment, and
// a POST's answer is read at most MaxMCPResponseBytes.
type mcpTransport struct {
	c        *Client
	cn       *conn
	hostport string // the one "host:port" requests may dial
}

// errMCPTooBig is the error of a response over MaxMCPResponseBytes.
var errMCPTooBig = fmt.Errorf("the server's answer is over the limit of %d bytes", MaxMCPResponseBytes)

// RoundTrip implements http.RoundTripper.
func (t *mcpTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	h, red, err := t.c.mcpHeaders(ctx, t.cn)
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper closes the body, also when it fails
		}
		return nil, err
	}
	out := req.Clone(withAllowedHost(ctx, t.hostport))
	for k, vs := range h {
		out.Header[k] = vs
	}
	out.Header.Set("User-Agent", "svc-connection")
	resp, err := t.c.tr.RoundTrip(out)
	if err != nil {
		return nil, red.err(err)
	}
	if req.Method == http.MethodPost {
		resp.Body = &limitedBody{rc: resp.Body, left: MaxMCPResponseBytes, over: &t.cn.mcp.tooBig}
	}
	return resp, nil
}

// limitedBody fails a read past its limit with errMCPTooBig, so that an answer too big is
// never held whole.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
	over *atomic.Bool // set when the limit is reached: the SDK's error would not say why
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One more byte says whether the body really goes on.
		var one [1]byte
		if n, err := b.rc.Read(one[:]); n == 0 && errors.Is(err, io.EOF) {
			return 0, io.EOF
		}
		b.over.Store(true)
		return 0, errMCPTooBig
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
