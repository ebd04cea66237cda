package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"svc/auth"
	"svc/errcode"
)

// MaxBodyBytes is the largest request body the platform API reads (spec §8: 50 MB). One byte
// more is a 413 PAYLOAD_TOO_LARGE.
const MaxBodyBytes = 50 << 20

// RequestIDHeader carries the request id on every response; a valid incoming one is kept
// (see validRequestID).
const RequestIDHeader = "X-Request-Id"

const maxRequestIDLen = 64

// Context keys (unexported types, read through accessors).
type (
	requestIDKey struct{}
	loggerKey    struct{}
)

// requestID assigns the request id (the caller's when valid, else a new one), sets the response
// header and puts a logger carrying it in the request context.
func (a *API) requestID(c *gin.Context) {
	id := c.GetHeader(RequestIDHeader)
	if !validRequestID(id) {
		id = auth.NewID("r")
	}
	c.Header(RequestIDHeader, id)
	log := a.deps.Logger.With(slog.String("request_id", id))
	ctx := context.WithValue(c.Request.Context(), requestIDKey{}, id)
	ctx = context.WithValue(ctx, loggerKey{}, log)
	c.Request = c.Request.WithContext(ctx)
	c.Next()
}

// validRequestID accepts 1 to 64 characters of [A-Za-z0-9._:-], so an id can be logged and
// echoed without escaping. A value that looks like a credential (pk_ or ak_, or a JWT, which is
// longer) is never taken: a client that put its token there must not find it in the logs.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen || strings.HasPrefix(id, auth.PlatformPrefix) || strings.HasPrefix(id, auth.AgentKeyPrefix) {
		return false
	}
	for i := 0; i < len(id); i++ {
		ch := id[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == ':' || ch == '-') {
			return false
		}
	}
	return true
}

// RequestIDFrom returns the request id of ctx ("" outside a platform request).
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

func requestID(c *gin.Context) string { return RequestIDFrom(c.Request.Context()) }

// logger returns the request's logger (with its request id), or the API's.
func (a *API) logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return a.deps.Logger
}

// observe writes the access log line and the metrics of every request. It logs the route
// template, never the query string, headers or body.
func (a *API) observe(c *gin.Context) {
	start := time.Now()
	route := c.FullPath() // a template, never the path the client sent
	if route == "" {
		route = "unmatched"
	}
	method := methodLabel(c.Request.Method)
	var span trace.Span
	if tr := a.deps.Tracer; tr != nil {
		// A request joins the trace its caller sent (W3C traceparent), and what it starts (a
		// build through the queue) joins this one.
		ctx := propagation.TraceContext{}.Extract(c.Request.Context(), propagation.HeaderCarrier(c.Request.Header))
		ctx, span = tr.Start(ctx, method+" "+route, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("http.request.method", method), attribute.String("http.route", route)))
		c.Request = c.Request.WithContext(ctx)
	}
	c.Next()
	elapsed := time.Since(start)
	status := c.Writer.Status()
	if span != nil {
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= http.StatusInternalServerError {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
		span.End()
	}
	a.metrics.requests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
	a.metrics.latency.WithLabelValues(method, route).Observe(elapsed.Seconds())

	attrs := []slog.Attr{
		slog.String("method", method),
		slog.String("route", route),
		slog.Int("status", status),
		slog.Float64("latency_ms", float64(elapsed.Microseconds())/1000),
		slog.Int("bytes", c.Writer.Size()),
	}
	if p, ok := PrincipalFrom(c); ok {
		attrs = append(attrs, slog.String("token_id", p.TokenID))
	}

	if code, ok := c.Get(errorCodeKey{}); ok {
		attrs = append(attrs, slog.String("error_code", fmt.Sprint(code)))
	}
	level := slog.LevelInfo
	if status >= http.StatusInternalServerError {
		level = slog.LevelWarn
	}
	a.logger(c.Request.Context()).LogAttrs(c.Request.Context(), level, "request", attrs...)
}

// recoverPanics turns a handler panic into a 500 INTERNAL (logged with its stack) instead of a dropped
// connection. http.ErrAbortHandler is re-raised: it is how a handler aborts a response on purpose.
func (a *API) recoverPanics(c *gin.Context) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if v == http.ErrAbortHandler { //nolint:errorlint // a panic value, compared as net/http does
			panic(v)
		}
		a.logger(c.Request.Context()).LogAttrs(c.Request.Context(), slog.LevelError, "handler panicked",
			slog.String("panic", fmt.Sprint(v)), slog.String("stack", string(debug.Stack())))
		a.writeError(c, &Error{Code: errcode.Internal, Cause: fmt.Errorf("panic: %v", v)})
	}()
	c.Next()
}

// limitBody refuses a body declared larger than MaxBodyBytes at once, and bounds every other
// body so that reading past the limit fails with *http.MaxBytesError (a 413 through classify).
func (a *API) limitBody(c *gin.Context) {
	if c.Request.ContentLength > MaxBodyBytes {
		a.writeError(c, &Error{Code: errcode.PayloadTooLarge})
		c.Abort()
		return
	}
	if c.Request.Body != nil && c.Request.Body != http.NoBody {
		c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, MaxBodyBytes)
	}
	c.Next()
}

// httpMetrics are the Prometheus metrics of the platform API.
type httpMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newHTTPMetrics() httpMetrics {
	return httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_http_requests_total",
			Help: "Platform API requests by method, route template and status.",
		}, []string{"method", "route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "svc_http_request_duration_seconds",
			Help:    "Platform API request latency by method and route template.",
			Buckets: prometheus.DefBuckets,
		}, []string{"method", "route"}),
	}
}
