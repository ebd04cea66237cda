package api_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"svc/api"
	"svc/auth"
	"svc/errcode"
	"svc/migrations/dbtest"
	"svc/registry"
)

// TestErrorCatalog registers routes that fail in every way a handler can and checks the envelope:
// domain sentinels map to their codes, unknown errors and panics become a generic INTERNAL that
// is logged with its cause but never shown.
func TestErrorCatalog(t *testing.T) {
	h := newHarness(t, dbtest.SQLite(t))
	tests := []struct {
		err    error
		status int
		code   string
		msg    string
	}{
		{api.Errorf(errcode.Conflict, "custom %d", 7), 409, "CONFLICT", "custom 7"},
		{api.InvalidField("thing", "is odd"), 400, "INVALID_REQUEST", "thing: is odd"},
		{fmt.Errorf("get: %w", registry.ErrAgentNotFound), 404, "NOT_FOUND", "agent not found"},
		{fmt.Errorf("%w: slug \"x\" is taken", registry.ErrConflict), 409, "CONFLICT", `slug "x" is taken`},
		{fmt.Errorf("%w: svc/evals is failure for commit abc", registry.ErrEvalGateBlocked), 422, "EVAL_GATE_BLOCKED", "svc/evals is failure"},
		{registry.ErrNothingToRollBack, 422, "NOTHING_TO_ROLL_BACK", "no earlier deployment"},
		{fmt.Errorf("copy: %w", registry.ErrBundleUnavailable), 422, "BUNDLE_UNAVAILABLE", "bundle"},
		{registry.ErrBuildNotReady, 422, "BUILD_NOT_READY", "not ready"},
		{registry.ErrDeploymentNotFound, 404, "NOT_FOUND", "deployment not found"},
		{registry.ErrNoActive, 404, "NOT_FOUND", "no active deployment"},
		{&registry.InvalidError{Field: "branch", Reason: "is bad"}, 400, "INVALID_REQUEST", "branch: is bad"},
		{auth.ErrForbidden, 403, "FORBIDDEN", "may not"},
		{&http.MaxBytesError{Limit: 1}, 413, "PAYLOAD_TOO_LARGE", "larger than"},
		{errors.New("pq: connection to 10.0.0.7 refused; password=hunter2"), 500, "INTERNAL", "internal error; see the server log for request"},
		{api.Errorf(errcode.NoActiveDeployment, ""), 503, "NO_ACTIVE_DEPLOYMENT", "no active production deployment"},
	}
	for i, tt := range tests {
		err := tt.err
		h.api.Handle(api.Route{Method: "GET", Path: fmt.Sprintf("/test/err%d", i), Handle: func(*gin.Context) error { return err }})
	}
	h.api.Handle(api.Route{Method: "GET", Path: "/test/panic", Handle: func(*gin.Context) error { panic("boom: secret-ish detail") }})
	h.api.Handle(api.Route{Method: "GET", Path: "/test/agent/:id", Need: auth.Observer, Agent: true, Handle: func(c *gin.Context) error {
		p, _ := api.PrincipalFrom(c)
		ag, _ := api.AgentFrom(c.Request.Context())
		c.String(http.StatusOK, p.TokenID+" "+ag.ID)
		return nil
	}})

	for i, tt := range tests {
		rec := h.do(request{method: "GET", path: fmt.Sprintf("/test/err%d", i)})
		if rec.Code != tt.status {
			t.Errorf("%v: status %d, want %d", tt.err, rec.Code, tt.status)
			continue
		}
		e := errorOf(t, rec)
		if e.Error.Code != tt.code || !strings.Contains(e.Error.Message, tt.msg) {
			t.Errorf("%v: error %+v, want %s with %q", tt.err, e.Error, tt.code, tt.msg)
		}
	}
	if strings.Contains(strings.Join(h.bodies, "\n"), "hunter2") {
		t.Error("an internal error's text reached a response")
	}
	if !strings.Contains(h.logs.String(), "hunter2") || !strings.Contains(h.logs.String(), `"msg":"internal error"`) {
		t.Error("an internal error was not logged with its cause")
	}

	rec := h.do(request{method: "GET", path: "/test/panic"})
	if rec.Code != 500 || errorOf(t, rec).Error.Code != "INTERNAL" || strings.Contains(rec.Body.String(), "boom") {
		t.Errorf("panic = %d %s, want a generic 500 INTERNAL", rec.Code, rec.Body.String())
	}
	if !strings.Contains(h.logs.String(), "handler panicked") {
		t.Error("a panic was not logged")
	}

	// The accessors give a handler its caller and agent.
	id := h.createAgent("x")
	tok, value := h.mintToken(auth.Observer, "")
	rec = h.do(request{method: "GET", path: "/test/agent/" + id, token: value})
	if rec.Code != 200 || rec.Body.String() != tok.ID+" "+id {
		t.Errorf("accessors = %d %q, want %q", rec.Code, rec.Body.String(), tok.ID+" "+id)
	}
}

func TestNewValidatesDeps(t *testing.T) {
	db := dbtest.SQLite(t)
	signer, err := auth.NewSigner([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, db)
	good := api.Deps{Stores: h.stores, Objects: h.objects, Tokens: registry.NewTokens(db), APIKeys: registry.NewAPIKeys(db), Signer: signer, Deployer: h.deployer}
	if _, err := api.New(good); err != nil {
		t.Fatalf("New(good deps) = %v", err)
	}
	for name, mod := range map[string]func(*api.Deps){
		"no stores":   func(d *api.Deps) { d.Stores = nil },
		"no deployer": func(d *api.Deps) { d.Deployer = nil },
		"no objects":  func(d *api.Deps) { d.Objects = nil },
		"no tokens":   func(d *api.Deps) { d.Tokens = nil },
	} {
		d := good
		mod(&d)
		if _, err := api.New(d); err == nil {
			t.Errorf("New with %s succeeded", name)
		}
	}
	// Two APIs may share one metrics registry (their collectors are reused).
	shared := good
	shared.Metrics = prometheus.NewRegistry()
	for i := range 2 {
		if _, err := api.New(shared); err != nil {
			t.Errorf("New #%d on a shared metrics registry = %v", i+1, err)
		}
	}
}
