package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"svc/agent"
	"svc/auth"
	"svc/registry"
)

// ErrorCode is an UPPER_SNAKE error code of the platform API. Each code has one HTTP status and
// one default message, registered together in catalog.
type ErrorCode string

// The error catalog of the platform API (CONTRACT §3).
const (
	CodeInvalidRequest       ErrorCode = "INVALID_REQUEST"
	CodeInvalidSource        ErrorCode = "INVALID_SOURCE"
	CodeUnauthenticated      ErrorCode = "UNAUTHENTICATED"
	CodeForbidden            ErrorCode = "FORBIDDEN"
	CodeNotFound             ErrorCode = "NOT_FOUND"
	CodeMethodNotAllowed     ErrorCode = "METHOD_NOT_ALLOWED"
	CodeConflict             ErrorCode = "CONFLICT"
	CodePayloadTooLarge      ErrorCode = "PAYLOAD_TOO_LARGE"
	CodeUnsupportedMediaType ErrorCode = "UNSUPPORTED_MEDIA_TYPE"
	CodeEvalGateBlocked      ErrorCode = "EVAL_GATE_BLOCKED"
	CodeNothingToRollBack    ErrorCode = "NOTHING_TO_ROLL_BACK"
	CodeBundleUnavailable    ErrorCode = "BUNDLE_UNAVAILABLE"
	CodeBuildNotReady        ErrorCode = "BUILD_NOT_READY"
	CodeInternal             ErrorCode = "INTERNAL"
	CodeUnavailable          ErrorCode = "UNAVAILABLE"
	CodeNoActiveDeployment   ErrorCode = "NO_ACTIVE_DEPLOYMENT"
)

// catalog is the one registration of every code: its HTTP status and default message.
func catalog(code ErrorCode) (status int, message string) {
	switch code {
	case CodeInvalidRequest:
		return http.StatusBadRequest, "the request is invalid"
	case CodeInvalidSource:
		return http.StatusBadRequest, "the source tree is invalid"
	case CodeUnauthenticated:
		return http.StatusUnauthorized, "a valid pk_ automation token is required"
	case CodeForbidden:
		return http.StatusForbidden, "this token may not make this call"
	case CodeNotFound:
		return http.StatusNotFound, "not found"
	case CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed, "method not allowed on this path"
	case CodeConflict:
		return http.StatusConflict, "the request conflicts with an existing record"
	case CodePayloadTooLarge:
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is larger than %d bytes", MaxBodyBytes)
	case CodeUnsupportedMediaType:
		return http.StatusUnsupportedMediaType, "unsupported Content-Type"
	case CodeEvalGateBlocked:
		return http.StatusUnprocessableEntity, "the svc/evals status of the commit blocks promotion"
	case CodeNothingToRollBack:
		return http.StatusUnprocessableEntity, "no earlier deployment qualifies for rollback"
	case CodeBundleUnavailable:
		return http.StatusUnprocessableEntity, "the deployment's bundle is missing or cannot be copied"
	case CodeBuildNotReady:
		return http.StatusUnprocessableEntity, "the deployment's build is not ready"
	case CodeUnavailable:
		return http.StatusServiceUnavailable, "the service is unavailable"
	case CodeNoActiveDeployment:
		return http.StatusServiceUnavailable, "the agent has no active production deployment"
	}
	return http.StatusInternalServerError, "internal error"
}

// allCodes lists the catalog, for the OpenAPI document.
func allCodes() []ErrorCode {
	return []ErrorCode{
		CodeInvalidRequest, CodeInvalidSource, CodeUnauthenticated, CodeForbidden, CodeNotFound, CodeMethodNotAllowed,
		CodeConflict, CodePayloadTooLarge, CodeUnsupportedMediaType, CodeEvalGateBlocked, CodeNothingToRollBack,
		CodeBundleUnavailable, CodeBuildNotReady, CodeInternal, CodeUnavailable, CodeNoActiveDeployment,
	}
}

// Status returns the HTTP status of code.
func (code ErrorCode) Status() int {
	s, _ := catalog(code)
	return s
}

// Error is an error a handler returns to show its caller: a catalog code, a message (the code's
// default when empty), and for INVALID_REQUEST the field, for INVALID_SOURCE the problems.
// Cause is logged, never shown.
type Error struct {
	Code     ErrorCode
	Message  string
	Field    string
	Problems []agent.Problem
	Cause    error
}

// Error returns the code and message.
func (e *Error) Error() string { return string(e.Code) + ": " + e.message() }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

func (e *Error) message() string {
	if e.Message != "" {
		return e.Message
	}
	_, m := catalog(e.Code)
	return m
}

// Errorf returns an *Error with code and a formatted message.
func Errorf(code ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// InvalidField returns an INVALID_REQUEST error about field: "<field>: <reason>".
func InvalidField(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidRequest, Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}

// errorBody is the one envelope of every platform error.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code     ErrorCode       `json:"code" doc:"UPPER_SNAKE error code"`
	Message  string          `json:"message"`
	Field    string          `json:"field,omitempty" doc:"the offending request field (INVALID_REQUEST)"`
	Problems []agent.Problem `json:"problems,omitempty" doc:"every problem of the source tree (INVALID_SOURCE)"`
}

// classify maps any error a handler returns to the *Error shown for it. Domain sentinels are
// translated here, in one place; an error it does not know is INTERNAL (internal reports true).
func classify(err error) (e *Error, internal bool) {
	var apiErr *Error
	var maxBytes *http.MaxBytesError
	var invalid *registry.InvalidError
	var problems agent.Problems
	switch {
	case errors.As(err, &apiErr):
		return apiErr, apiErr.Code == CodeInternal
	case errors.As(err, &maxBytes):
		return &Error{Code: CodePayloadTooLarge, Cause: err}, false
	case errors.As(err, &invalid):
		return &Error{Code: CodeInvalidRequest, Field: invalid.Field, Message: invalid.Error(), Cause: err}, false
	case errors.As(err, &problems):
		return &Error{Code: CodeInvalidSource, Message: problemsMessage(problems), Problems: problems, Cause: err}, false
	case errors.Is(err, auth.ErrUnauthenticated):
		return &Error{Code: CodeUnauthenticated, Cause: err}, false
	case errors.Is(err, auth.ErrForbidden):
		return &Error{Code: CodeForbidden, Cause: err}, false
	case errors.Is(err, auth.ErrInvalidKind):
		return &Error{Code: CodeInvalidRequest, Field: "kind", Message: "kind: must be observer, operator or admin", Cause: err}, false
	case errors.Is(err, auth.ErrNotFound):
		return &Error{Code: CodeNotFound, Message: "token not found", Cause: err}, false
	case errors.Is(err, registry.ErrAgentNotFound):
		return &Error{Code: CodeNotFound, Message: "agent not found", Cause: err}, false
	case errors.Is(err, registry.ErrSourceNotFound):
		return &Error{Code: CodeNotFound, Message: "the agent has no source", Cause: err}, false
	case errors.Is(err, registry.ErrSourceVersionNotFound):
		return &Error{Code: CodeNotFound, Message: "source version not found", Cause: err}, false
	case errors.Is(err, registry.ErrCommitStatusNotFound):
		return &Error{Code: CodeNotFound, Message: "commit status not found", Cause: err}, false
	case errors.Is(err, registry.ErrDeploymentNotFound):
		return &Error{Code: CodeNotFound, Message: "deployment not found", Cause: err}, false
	case errors.Is(err, registry.ErrBuildNotFound):
		return &Error{Code: CodeNotFound, Message: "build not found", Cause: err}, false
	case errors.Is(err, registry.ErrNoActive):
		return &Error{Code: CodeNotFound, Message: "the environment has no active deployment", Cause: err}, false
	case errors.Is(err, registry.ErrConflict):
		return &Error{Code: CodeConflict, Message: detail(err, registry.ErrConflict), Cause: err}, false
	case errors.Is(err, registry.ErrBuildFinished):
		return &Error{Code: CodeConflict, Message: "the build has already finished", Cause: err}, false
	case errors.Is(err, registry.ErrEvalGateBlocked):
		return &Error{Code: CodeEvalGateBlocked, Message: detail(err, registry.ErrEvalGateBlocked), Cause: err}, false
	case errors.Is(err, registry.ErrNothingToRollBack):
		return &Error{Code: CodeNothingToRollBack, Cause: err}, false
	case errors.Is(err, registry.ErrBundleUnavailable):
		return &Error{Code: CodeBundleUnavailable, Cause: err}, false
	case errors.Is(err, registry.ErrBuildNotReady):
		return &Error{Code: CodeBuildNotReady, Cause: err}, false
	}
	return &Error{Code: CodeInternal, Cause: err}, true
}

// detail returns what err says after "<sentinel>: " when err is sentinel wrapped directly with a
// detail (fmt.Errorf("%w: ...", sentinel)), else "" (the code's default message). Registry
// details name inputs and states, never secret values.
func detail(err, sentinel error) string {
	d, ok := strings.CutPrefix(err.Error(), sentinel.Error()+": ")
	if !ok {
		return ""
	}
	return d
}

func problemsMessage(ps agent.Problems) string {
	if len(ps) == 1 {
		return "the source tree has 1 problem: " + ps[0].String()
	}
	return fmt.Sprintf("the source tree has %d problems; see problems", len(ps))
}

// writeError writes err as the error envelope, the one writer of error bodies. Unknown errors are
// logged with their cause and shown as a generic INTERNAL. Nothing is written when the response
// has started (a stream that failed midway); the error is logged instead.
func (a *API) writeError(c *gin.Context, err error) {
	e, internal := classify(err)
	ctx := c.Request.Context()
	log := a.logger(ctx)
	switch {
	case internal && errors.Is(err, context.Canceled) && ctx.Err() != nil:
		log.LogAttrs(ctx, slog.LevelInfo, "request cancelled by the client", slog.String("error", err.Error()))
	case internal:
		log.LogAttrs(ctx, slog.LevelError, "internal error", slog.String("error", err.Error()))
	}
	c.Set(errorCodeKey{}, e.Code)
	if c.Writer.Written() {
		if !internal {
			log.LogAttrs(ctx, slog.LevelWarn, "error after the response started", slog.String("code", string(e.Code)))
		}
		return
	}
	status, _ := catalog(e.Code)
	if status == http.StatusUnauthorized {
		c.Header("WWW-Authenticate", `Bearer realm="svc"`)
	}
	body := errorBody{Error: errorDetail{Code: e.Code, Message: e.message(), Field: e.Field, Problems: e.Problems}}
	if internal {
		body.Error.Message, body.Error.Field, body.Error.Problems = "internal error; see the server log for request "+requestID(c), "", nil
	}
	c.Abort()
	c.PureJSON(status, body)
}

// errorCodeKey keys the error code of a failed request in the gin context, for the access log.
type errorCodeKey struct{}
