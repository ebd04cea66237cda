// Package traces exports the process's spans over OTLP/HTTP (protobuf). Spans are the
// OpenTelemetry SDK's, batched by its batch span processor; the Exporter here encodes each batch
// straight from the SDK's read-only spans into one reused buffer and posts it. The OpenTelemetry
// project's OTLP exporter first builds the protobuf message tree (three objects for every
// attribute) and then marshals it: that was 61 of the 89 allocations a traced chat turn added,
// and most of the exporting CPU (BENCHMARKS.md, "Traces").
//
// ConfigFromEnv reads the standard OTEL_EXPORTER_OTLP_* settings of the OTLP exporter
// specification (endpoint, headers, timeout, compression, certificates); a bad value is an error
// that names the setting.
package traces

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// Config says where and how the Exporter posts.
type Config struct {
	// URL is the traces endpoint, such as http://collector:4318/v1/traces.
	URL string
	// Headers are set on every export request (OTEL_EXPORTER_OTLP_HEADERS).
	Headers map[string]string
	// Timeout bounds one export, retries included; zero means 10 s.
	Timeout time.Duration
	// Gzip compresses the request body.
	Gzip bool
	// TLS is the client's TLS configuration for an https URL; nil takes the system's roots.
	TLS *tls.Config
}

// DefaultTimeout is the export timeout of the OTLP specification.
const DefaultTimeout = 10 * time.Second

// Configured reports whether the environment asks for traces to be exported: whether
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set.
func Configured(lookup func(string) (string, bool)) bool {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		if v, _ := lookup(k); v != "" {
			return true
		}
	}
	return false
}

// ConfigFromEnv reads the OTLP exporter settings; the TRACES_ form of each setting takes
// precedence over the general one. OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is the traces URL as is;
// OTEL_EXPORTER_OTLP_ENDPOINT is a base URL that /v1/traces is added to.
func ConfigFromEnv(lookup func(string) (string, bool)) (Config, error) {
	get := func(name string) (string, string) {
		for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_" + name, "OTEL_EXPORTER_OTLP_" + name} {
			if v, ok := lookup(k); ok && strings.TrimSpace(v) != "" {
				return k, strings.TrimSpace(v)
			}
		}
		return "", ""
	}
	var c Config
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v, _ := lookup(k); v != "" && v != "http/protobuf" {
			return c, fmt.Errorf("setting %s = %q: svc exports traces over http/protobuf only", k, v)
		}
	}
	if v, ok := lookup("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); ok && v != "" {
		if err := checkURL(v); err != nil {
			return c, fmt.Errorf("setting OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: %w", err)
		}
		c.URL = v
	} else if v, ok := lookup("OTEL_EXPORTER_OTLP_ENDPOINT"); ok && v != "" {
		if err := checkURL(v); err != nil {
			return c, fmt.Errorf("setting OTEL_EXPORTER_OTLP_ENDPOINT: %w", err)
		}
		c.URL = strings.TrimSuffix(v, "/") + "/v1/traces"
	} else {
		c.URL = "http://localhost:4318/v1/traces"
	}
	if k, v := get("HEADERS"); v != "" {
		h, err := parseHeaders(v)
		if err != nil {
			return c, fmt.Errorf("setting %s: %w", k, err)
		}
		c.Headers = h
	}
	if k, v := get("TIMEOUT"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 || ms > 10*60*1000 {
			return c, fmt.Errorf("setting %s = %q: want milliseconds, 1 to 600000", k, v)
		}
		c.Timeout = time.Duration(ms) * time.Millisecond
	}
	if k, v := get("COMPRESSION"); v != "" {
		switch v {
		case "gzip":
			c.Gzip = true
		case "none":
		default:
			return c, fmt.Errorf("setting %s = %q: want gzip or none", k, v)
		}
	}
	tlsConf, err := tlsFromEnv(get)
	if err != nil {
		return c, err
	}
	c.TLS = tlsConf
	return c, nil
}

func checkURL(v string) error {
	u, err := url.Parse(v)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http:// or https:// URL with a host", v)
	}
	return nil
}

// parseHeaders reads key=value pairs separated by commas, values percent-encoded.
func parseHeaders(v string) (map[string]string, error) {
	h := make(map[string]string)
	for pair := range strings.SplitSeq(v, ",") {
		k, val, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", strings.TrimSpace(pair))
		}
		dec, err := url.PathUnescape(strings.TrimSpace(val))
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", k, err)
		}
		h[k] = dec
	}
	return h, nil
}

func tlsFromEnv(get func(string) (string, string)) (*tls.Config, error) {
	caKey, ca := get("CERTIFICATE")
	certKey, cert := get("CLIENT_CERTIFICATE")
	keyKey, key := get("CLIENT_KEY")
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("setting %s: %w", caKey, err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("setting %s: %s holds no PEM certificate", caKey, ca)
		}
	}
	switch {
	case cert != "" && key != "":
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("settings %s and %s: %w", certKey, keyKey, err)
		}
		c.Certificates = []tls.Certificate{pair}
	case cert != "":
		return nil, fmt.Errorf("setting %s needs OTEL_EXPORTER_OTLP_CLIENT_KEY too", certKey)
	case key != "":
		return nil, fmt.Errorf("setting %s needs OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE too", keyKey)
	}
	return c, nil
}

// Exporter is an sdktrace.SpanExporter that posts each batch to an OTLP/HTTP receiver. A batch
// the receiver refuses with 429, 502, 503 or 504, or that fails on the network, is posted again
// with backoff (honouring Retry-After) until the export's timeout.
type Exporter struct {
	cfg    Config
	client *http.Client

	mu        sync.Mutex // one export at a time: the buffers below are reused
	buf       []byte
	zbuf      bytes.Buffer
	zw        *gzip.Writer
	resources map[*resource.Resource][]byte // the encoded Resource field of each

	stopOnce sync.Once
	stop     chan struct{} // closed by Shutdown: a waiting retry gives up
}

// NewExporter returns an Exporter posting to cfg.URL.
func NewExporter(cfg Config) (*Exporter, error) {
	if err := checkURL(cfg.URL); err != nil {
		return nil, fmt.Errorf("OTLP traces URL: %w", err)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.TLS != nil {
		tr.TLSClientConfig = cfg.TLS
	}
	return &Exporter{cfg: cfg, client: &http.Client{Transport: tr}, stop: make(chan struct{})}, nil
}

// ExportSpans encodes spans and posts them.
func (e *Exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	select {
	case <-e.stop:
		return errors.New("OTLP trace exporter is shut down")
	default:
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.buf = e.appendRequest(e.buf[:0], spans)
	body := e.buf
	if e.cfg.Gzip {
		e.zbuf.Reset()
		if e.zw == nil {
			e.zw = gzip.NewWriter(&e.zbuf)
		} else {
			e.zw.Reset(&e.zbuf)
		}
		if _, err := e.zw.Write(body); err != nil {
			return err
		}
		if err := e.zw.Close(); err != nil {
			return err
		}
		body = e.zbuf.Bytes()
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	return e.post(ctx, body, len(spans))
}

// post sends body, again after a retryable failure, until ctx ends.
func (e *Exporter) post(ctx context.Context, body []byte, n int) error {
	backoff := 500 * time.Millisecond
	for {
		wait, err := e.postOnce(ctx, body, n)
		if err == nil || wait < 0 {
			return err
		}
		wait = max(wait, backoff)
		backoff = min(2*backoff, 5*time.Second)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up: %v)", err, ctx.Err())
		case <-e.stop:
			t.Stop()
			return fmt.Errorf("%w (gave up: exporter shut down)", err)
		}
	}
}

// postOnce posts body once; a retryable failure returns a wait of zero or more (Retry-After),
// a final one a wait below zero.
func (e *Exporter) postOnce(ctx context.Context, body []byte, n int) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return -1, err
	}
	for k, v := range e.cfg.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", "svc OTLP exporter")
	if e.cfg.Gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return -1, fmt.Errorf("export of %d spans to %s: %w", n, e.cfg.URL, err)
		}
		return 0, fmt.Errorf("export of %d spans to %s: %w", n, e.cfg.URL, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // let the connection be reused
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode <= 299:
		if resp.Header.Get("Content-Type") == "application/x-protobuf" {
			if rejected, why := partialSuccess(msg); rejected > 0 || why != "" {
				return -1, fmt.Errorf("export to %s: the receiver rejected %d of %d spans: %s", e.cfg.URL, rejected, n, why)
			}
		}
		return -1, nil
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusBadGateway,
		resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusGatewayTimeout:
		wait := time.Duration(0)
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			wait = time.Duration(s) * time.Second
		}
		return wait, fmt.Errorf("export of %d spans to %s: %s", n, e.cfg.URL, resp.Status)
	default:
		return -1, fmt.Errorf("export of %d spans to %s: %s: %s", n, e.cfg.URL, resp.Status, bytes.TrimSpace(msg))
	}
}

// partialSuccess reads ExportTraceServiceResponse.partial_success {rejected_spans = 1,
// error_message = 2}, field 1 of the response.
func partialSuccess(b []byte) (rejected int64, msg string) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, ""
		}
		b = b[n:]
		if num != 1 || typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return 0, ""
			}
			b = b[n:]
			continue
		}
		ps, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return 0, ""
		}
		b = b[n:]
		for len(ps) > 0 {
			num, typ, n := protowire.ConsumeTag(ps)
			if n < 0 {
				return rejected, msg
			}
			ps = ps[n:]
			switch {
			case num == 1 && typ == protowire.VarintType:
				v, n := protowire.ConsumeVarint(ps)
				if n < 0 {
					return rejected, msg
				}
				rejected, ps = int64(v), ps[n:]
			case num == 2 && typ == protowire.BytesType:
				v, n := protowire.ConsumeString(ps)
				if n < 0 {
					return rejected, msg
				}
				msg, ps = v, ps[n:]
			default:
				n := protowire.ConsumeFieldValue(num, typ, ps)
				if n < 0 {
					return rejected, msg
				}
				ps = ps[n:]
			}
		}
	}
	return rejected, msg
}

// Shutdown stops retries in progress; later exports fail. The batch span processor flushes
// what it holds before it calls Shutdown.
func (e *Exporter) Shutdown(context.Context) error {
	e.stopOnce.Do(func() { close(e.stop) })
	e.client.CloseIdleConnections()
	return nil
}
