package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"svc/errcode"
	"svc/runner/access"
	"svc/runner/turn"
)

// Error codes of the runtime API, the "error" field of an error body. Spec §7 names
// turn_in_progress and no_active_turn; the others follow the same lower_snake form.
const (
	CodeInvalidRequest  = "invalid_request"
	CodeUnauthenticated = "unauthenticated"
	CodeForbidden       = "forbidden"
	CodeNotFound        = "not_found"
	CodeBadMethod       = "method_not_allowed"
	CodeConflict        = "conflict"
	CodeTurnInProgress  = "turn_in_progress"
	CodeNoActiveTurn    = "no_active_turn"
	CodeAlreadyAnswered = "already_answered"
	CodeNotEligible     = "not_eligible_answerer"
	CodeScopeForbidden  = "scope_forbidden"
	CodeNotAwaiting     = "session_not_awaiting_input"
	CodeTooLarge        = "request_too_large"
	CodeSessionFull     = "session_storage_full"
	CodeAgentFull       = "agent_storage_full"
	CodeBusy            = "server_busy"
	CodeStoreDown       = "store_unavailable"
	CodeChannelDown     = "channel_unavailable"
	CodeProviderDown    = "identity_provider_unavailable"
	CodeInternal        = "internal"
)

// catalog holds the status and default message of each code (STYLE 15: one catalog).
var catalog = map[string]struct {
	status int
	msg    string
}{
	CodeInvalidRequest:  {http.StatusBadRequest, "invalid request"},
	CodeUnauthenticated: {http.StatusUnauthorized, "missing or invalid runtime token"},
	CodeForbidden:       {http.StatusForbidden, "this token may not use this agent"},
	CodeNotFound:        {http.StatusNotFound, "not found"},
	CodeBadMethod:       {http.StatusMethodNotAllowed, "the route does not take this method"},
	CodeConflict:        {http.StatusConflict, "the request conflicts with the state of what it names"},
	CodeTurnInProgress:  {http.StatusConflict, "a turn is already running in this session"},
	CodeNoActiveTurn:    {http.StatusConflict, "no turn of this session is accepting messages"},
	CodeAlreadyAnswered: {http.StatusConflict, "the approval was already decided"},
	CodeNotEligible:     {http.StatusForbidden, "the caller may not answer this pause"},
	CodeScopeForbidden:  {http.StatusForbidden, "a signed-in user without a scope claim may send no scope_id or its own user id"},
	CodeNotAwaiting:     {http.StatusConflict, "the durable session is not awaiting input"},
	CodeTooLarge:        {http.StatusRequestEntityTooLarge, "the request body is larger than 50 MB"},
	CodeSessionFull:     {http.StatusRequestEntityTooLarge, "the session holds as much as a session may"},
	CodeAgentFull:       {http.StatusTooManyRequests, "the agent's sessions hold as much as an agent may"},
	CodeBusy:            {http.StatusServiceUnavailable, "the runtime is busy; retry in a few seconds"},
	CodeStoreDown:       {http.StatusServiceUnavailable, "the agent's stores database is unavailable"},
	CodeChannelDown:     {http.StatusServiceUnavailable, "the messaging channel's settings are not set"},
	CodeProviderDown:    {http.StatusBadGateway, "the agent's identity provider could not be reached"},
	CodeInternal:        {http.StatusInternalServerError, "internal error"},
}

// APIError is an error answered with its code's status and the body
// {"error": code, "message": ..., "field": ...}.
type APIError struct {
	Code    string
	Message string
	Field   string // the request field at fault, for invalid_request
	// AnsweredBy names who answered, for session_not_awaiting_input (spec 7).
	AnsweredBy string
}

// Error implements error.
func (e *APIError) Error() string {
	if e.Field != "" {
		return e.Code + ": " + e.Field + ": " + e.Message
	}
	return e.Code + ": " + e.Message
}

func apiErr(code string) *APIError { return &APIError{Code: code, Message: catalog[code].msg} }

// invalid is a 400 naming field.
func invalid(field, format string, args ...any) *APIError {
	return &APIError{Code: CodeInvalidRequest, Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}

type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message,omitempty"`
	Field   string `json:"field,omitempty"`
	// AnsweredBy is set on session_not_awaiting_input when the pause was answered.
	AnsweredBy string `json:"answeredBy,omitempty"`
}

// writeError answers err: an *APIError as itself, a *turn.Error as its code, a *turn.BlockedError
// as 422 MESSAGE_BLOCKED in the platform's envelope {"error": {"code", "message"}} (spec §7 fixes
// it), the refusals of package access as CONTRACT §8 names them (403 ACCESS_DENIED and
// CSRF_REJECTED in the platform's envelope, 403 scope_forbidden, 401 unauthenticated), anything
// else as a logged 500 with a generic message.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var ae *APIError
	var te *turn.Error
	var be *turn.BlockedError
	switch {
	case errors.As(err, &be):
		errcode.Write(w, errcode.MessageBlocked, be.Error())
		return
	case errors.Is(err, access.ErrAccessDenied):
		errcode.Write(w, errcode.AccessDenied, accessMessage(err))
		return
	case errors.Is(err, access.ErrCSRF):
		errcode.Write(w, errcode.CSRFRejected, accessMessage(err))
		return
	case errors.As(err, &ae):
	case errors.As(err, &te):
		ae = fromTurn(te)
	case errors.Is(err, access.ErrScopeForbidden):
		ae = &APIError{Code: CodeScopeForbidden, Message: accessMessage(err)}
	case errors.Is(err, access.ErrUnauthenticated):
		ae = &APIError{Code: CodeUnauthenticated, Message: accessMessage(err)}
	default:
		log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		ae = apiErr(CodeInternal)
	}
	status := catalog[ae.Code].status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	writeJSON(w, status, errorBody{Error: ae.Code, Message: ae.Message, Field: ae.Field, AnsweredBy: ae.AnsweredBy})
}

// accessMessage is the message of a refusal of package access, without its package prefix.
func accessMessage(err error) string {
	return strings.TrimPrefix(err.Error(), "access: ")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":"internal","message":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n')) // a client that left cannot be told
}

// turnCodes are the codes of a turn's refusals.
var turnCodes = map[turn.Kind]string{
	turn.Invalid:      CodeInvalidRequest,
	turn.Busy:         CodeTurnInProgress,
	turn.SessionFull:  CodeSessionFull,
	turn.AgentFull:    CodeAgentFull,
	turn.NotFound:     CodeNotFound,
	turn.NoActiveTurn: CodeNoActiveTurn,
}

// fromTurn is the answer to a turn's refusal.
func fromTurn(e *turn.Error) *APIError {
	code, ok := turnCodes[e.Kind]
	if !ok {
		code = CodeInternal
	}
	msg := e.Message
	if msg == "" {
		msg = catalog[code].msg
	}
	return &APIError{Code: code, Message: msg, Field: e.Field}
}
