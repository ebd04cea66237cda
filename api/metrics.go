package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"svc/errcode"
)

// MetricsHandler serves g's metrics in the Prometheus text format: GET /metrics of every role
// (the platform API of svc up and svc api, svc runner's own host, svc worker's --metrics-addr).
// With token set (SVC_METRICS_TOKEN) a request needs "Authorization: Bearer <token>", compared
// in constant time, else it is 401 UNAUTHENTICATED; with token empty /metrics is open.
func MetricsHandler(g prometheus.Gatherer, token string) http.Handler {
	h := promhttp.HandlerFor(g, promhttp.HandlerOpts{})
	if token == "" {
		return h
	}
	// Hashes of equal length, so that the comparison takes the same time whatever was sent.
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, cred, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		got := sha256.Sum256([]byte(strings.TrimSpace(cred)))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 || !strings.EqualFold(scheme, "Bearer") {
			w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			errcode.Write(w, errcode.Unauthenticated, "GET /metrics needs Authorization: Bearer <the value of SVC_METRICS_TOKEN>")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// methodLabel is the request method as a label value and span name: a client may send any
// token as its method, and each distinct label value is a series kept for the life of the
// process, so any but the standard methods is "other".
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return method
	}
	return "other"
}
