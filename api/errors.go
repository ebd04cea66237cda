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
	"svc/deploy"
	"svc/errcode"
	"svc/registry"
)

// Error is an error a handler returns to show its caller: a catalog code, a message (the code's
// default when empty), and for INVALID_REQUEST the field, for INVALID_SOURCE the problems.
// Cause is logged, never shown.
type Error struct {
	Code     errcode.Code
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
	return e.Code.Message()
}

// Errorf returns an *Error with code and a formatted message.
func Errorf(code errcode.Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// InvalidField returns an INVALID_REQUEST error about field: "<field>: <reason>".
func InvalidField(field, format string, args ...any) *Error {
	return &Error{Code: errcode.InvalidRequest, Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}

// errorBody is the one envelope of every platform error.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code     errcode.Code    `json:"code" doc:"UPPER_SNAKE error code"`
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
	var bundleErr *deploy.BundleError
	var notBuilt *deploy.NotBuiltError
	switch {
	case errors.As(err, &apiErr):
		return apiErr, apiErr.Code == errcode.Internal
	// deploy's errors before the rest: a bundle that does not open may wrap any cause.
	case errors.As(err, &bundleErr):
		return &Error{Code: errcode.BundleUnavailable, Cause: err,
			Message: fmt.Sprintf("the bundle of deployment %s is missing or does not open; nothing was changed", bundleErr.DeployID)}, false
	case errors.As(err, &notBuilt):
		return &Error{Code: errcode.BuildNotReady, Message: fmt.Sprintf("deployment %s has no bundle (status %s)", notBuilt.DeployID, notBuilt.Status), Cause: err}, false
	case errors.Is(err, deploy.ErrNothingToPromote):
		return &Error{Code: errcode.BundleUnavailable, Message: detail(err, deploy.ErrNothingToPromote), Cause: err}, false
	case errors.As(err, &maxBytes):
		return &Error{Code: errcode.PayloadTooLarge, Cause: err}, false
	case errors.As(err, &invalid):
		return &Error{Code: errcode.InvalidRequest, Field: invalid.Field, Message: invalid.Error(), Cause: err}, false
	case errors.As(err, &problems):
		return &Error{Code: errcode.InvalidSource, Message: problemsMessage(problems), Problems: problems, Cause: err}, false
	case errors.Is(err, auth.ErrUnauthenticated):
		return &Error{Code: errcode.Unauthenticated, Cause: err}, false
	case errors.Is(err, auth.ErrForbidden):
		return &Error{Code: errcode.Forbidden, Cause: err}, false
	case errors.Is(err, auth.ErrInvalidKind):
		return &Error{Code: errcode.InvalidRequest, Field: "kind", Message: "kind: must be observer, operator or admin", Cause: err}, false
	case errors.Is(err, auth.ErrNotFound):
		return &Error{Code: errcode.NotFound, Message: "token not found", Cause: err}, false
	case errors.Is(err, registry.ErrAgentNotFound):
		return &Error{Code: errcode.NotFound, Message: "agent not found", Cause: err}, false
	case errors.Is(err, registry.ErrSourceNotFound):
		return &Error{Code: errcode.NotFound, Message: "the agent has no source", Cause: err}, false
	case errors.Is(err, registry.ErrSourceVersionNotFound):
		return &Error{Code: errcode.NotFound, Message: "source version not found", Cause: err}, false
	case errors.Is(err, registry.ErrCommitStatusNotFound):
		return &Error{Code: errcode.NotFound, Message: "commit status not found", Cause: err}, false
	case errors.Is(err, registry.ErrDeploymentNotFound):
		return &Error{Code: errcode.NotFound, Message: "deployment not found", Cause: err}, false
	case errors.Is(err, registry.ErrBuildNotFound):
		return &Error{Code: errcode.NotFound, Message: "build not found", Cause: err}, false
	case errors.Is(err, registry.ErrRunNotFound):
		return &Error{Code: errcode.NotFound, Message: "run not found", Cause: err}, false
	case errors.Is(err, registry.ErrNoActive):
		return &Error{Code: errcode.NotFound, Message: "the environment has no active deployment", Cause: err}, false
	case errors.Is(err, registry.ErrConflict):
		return &Error{Code: errcode.Conflict, Message: detail(err, registry.ErrConflict), Cause: err}, false
	case errors.Is(err, registry.ErrBuildFinished):
		return &Error{Code: errcode.Conflict, Message: "the build has already finished", Cause: err}, false
	case errors.Is(err, registry.ErrEvalGateBlocked):
		return &Error{Code: errcode.EvalGateBlocked, Message: detail(err, registry.ErrEvalGateBlocked), Cause: err}, false
	case errors.Is(err, registry.ErrNothingToRollBack):
		return &Error{Code: errcode.NothingToRollBack, Cause: err}, false
	case errors.Is(err, registry.ErrBundleUnavailable):
		return &Error{Code: errcode.BundleUnavailable, Cause: err}, false
	case errors.Is(err, registry.ErrBuildNotReady):
		return &Error{Code: errcode.BuildNotReady, Cause: err}, false
	}
	return &Error{Code: errcode.Internal, Cause: err}, true
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
	status := e.Code.Status()
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
