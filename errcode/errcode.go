// Package errcode is the one catalog of the platform's UPPER_SNAKE error codes: each code with
// its HTTP status and default message, registered together, and the one writer of the
// {"error":{"code","message"}} envelope. The platform API (api) and the agent host router
// (runner) both answer from it, so a code means one thing with one status wherever it appears.
// It knows no web framework. The runtime's own lower_snake codes are a separate catalog
// (runner/runtime), the body shape of spec §7; of this catalog the runtime answers only
// MESSAGE_BLOCKED, whose envelope spec §7 fixes.
package errcode

import (
	"encoding/json"
	"net/http"
)

// Code is an UPPER_SNAKE error code.
type Code string

// The catalog.
const (
	InvalidRequest       Code = "INVALID_REQUEST"
	InvalidSource        Code = "INVALID_SOURCE"
	Unauthenticated      Code = "UNAUTHENTICATED"
	Forbidden            Code = "FORBIDDEN"
	NotFound             Code = "NOT_FOUND"
	MethodNotAllowed     Code = "METHOD_NOT_ALLOWED"
	Conflict             Code = "CONFLICT"
	PayloadTooLarge      Code = "PAYLOAD_TOO_LARGE"
	UnsupportedMediaType Code = "UNSUPPORTED_MEDIA_TYPE"
	EvalGateBlocked      Code = "EVAL_GATE_BLOCKED"
	NothingToRollBack    Code = "NOTHING_TO_ROLL_BACK"
	BundleUnavailable    Code = "BUNDLE_UNAVAILABLE"
	BuildNotReady        Code = "BUILD_NOT_READY"
	Internal             Code = "INTERNAL"
	Unavailable          Code = "UNAVAILABLE"
	NoActiveDeployment   Code = "NO_ACTIVE_DEPLOYMENT"
	RuntimeStopped       Code = "RUNTIME_STOPPED"
	DeploymentNotReady   Code = "DEPLOYMENT_NOT_READY"
	RuntimeUnavailable   Code = "RUNTIME_UNAVAILABLE"
	MessageBlocked       Code = "MESSAGE_BLOCKED"
	AccessDenied         Code = "ACCESS_DENIED"
	CSRFRejected         Code = "CSRF_REJECTED"
)

type entry struct {
	status  int
	message string
}

var catalog = map[Code]entry{
	InvalidRequest:       {http.StatusBadRequest, "the request is invalid"},
	InvalidSource:        {http.StatusBadRequest, "the source tree is invalid"},
	Unauthenticated:      {http.StatusUnauthorized, "a valid pk_ automation token is required"},
	Forbidden:            {http.StatusForbidden, "this token may not make this call"},
	NotFound:             {http.StatusNotFound, "not found"},
	MethodNotAllowed:     {http.StatusMethodNotAllowed, "method not allowed on this path"},
	Conflict:             {http.StatusConflict, "the request conflicts with an existing record"},
	PayloadTooLarge:      {http.StatusRequestEntityTooLarge, "the request body is larger than 52428800 bytes (50 MB)"},
	UnsupportedMediaType: {http.StatusUnsupportedMediaType, "unsupported Content-Type"},
	EvalGateBlocked:      {http.StatusUnprocessableEntity, "the svc/evals status of the commit blocks promotion"},
	NothingToRollBack:    {http.StatusUnprocessableEntity, "no earlier deployment qualifies for rollback"},
	BundleUnavailable:    {http.StatusUnprocessableEntity, "the deployment's bundle is missing or does not open"},
	BuildNotReady:        {http.StatusUnprocessableEntity, "the deployment's build is not ready"},
	Internal:             {http.StatusInternalServerError, "internal error"},
	Unavailable:          {http.StatusServiceUnavailable, "the service is unavailable"},
	NoActiveDeployment:   {http.StatusServiceUnavailable, "the agent has no active production deployment"},
	RuntimeStopped:       {http.StatusServiceUnavailable, "the deployment's runtime is stopped"},
	DeploymentNotReady:   {http.StatusServiceUnavailable, "the deployment is not ready"},
	RuntimeUnavailable:   {http.StatusServiceUnavailable, "the deployment's runtime could not be loaded"},
	MessageBlocked:       {http.StatusUnprocessableEntity, "the message was blocked by the agent's preInput guardrail"},
	AccessDenied:         {http.StatusForbidden, "no allow rule of the agent admits this user"},
	CSRFRejected:         {http.StatusForbidden, "a request authenticated by the session cookie came from another origin"},
}

// All lists the catalog in a fixed order.
func All() []Code {
	return []Code{
		InvalidRequest, InvalidSource, Unauthenticated, Forbidden, NotFound, MethodNotAllowed, Conflict,
		PayloadTooLarge, UnsupportedMediaType, EvalGateBlocked, NothingToRollBack, BundleUnavailable,
		BuildNotReady, Internal, Unavailable, NoActiveDeployment, RuntimeStopped, DeploymentNotReady,
		RuntimeUnavailable, MessageBlocked, AccessDenied, CSRFRejected,
	}
}

// Status is the HTTP status of c; an unknown code is 500.
func (c Code) Status() int {
	if e, ok := catalog[c]; ok {
		return e.status
	}
	return http.StatusInternalServerError
}

// Message is the default message of c.
func (c Code) Message() string {
	if e, ok := catalog[c]; ok {
		return e.message
	}
	return catalog[Internal].message
}

// Write answers code's status with the envelope {"error":{"code","message"}}; message "" gives
// the code's default message.
func Write(w http.ResponseWriter, code Code, message string) {
	if message == "" {
		message = code.Message()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code.Status())
	body := map[string]map[string]string{"error": {"code": string(code), "message": message}}
	_ = json.NewEncoder(w).Encode(body) // the client may be gone
}
