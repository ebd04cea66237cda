package client

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"
)

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 1 << 20

// Error codes of CONTRACT §3 that callers commonly branch on.
const (
	CodeUnauthenticated    = "UNAUTHENTICATED"
	CodeForbidden          = "FORBIDDEN"
	CodeNotFound           = "NOT_FOUND"
	CodeInvalidRequest     = "INVALID_REQUEST"
	CodeInvalidSource      = "INVALID_SOURCE"
	CodeConflict           = "CONFLICT"
	CodeEvalGateBlocked    = "EVAL_GATE_BLOCKED"
	CodeNothingToRollBack  = "NOTHING_TO_ROLL_BACK"
	CodeBundleUnavailable  = "BUNDLE_UNAVAILABLE"
	CodeBuildNotReady      = "BUILD_NOT_READY"
	CodeNoActiveDeployment = "NO_ACTIVE_DEPLOYMENT"
)

// Problem is one problem of a refused source tree: the file, the line when there is one, and what
// is wrong.
type Problem struct {
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
}

// String renders the problem as "file:line: message" (the line left out when unknown).
func (p Problem) String() string {
	switch {
	case p.File == "":
		return p.Message
	case p.Line > 0:
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Message)
	default:
		return p.File + ": " + p.Message
	}
}

// Error is an answer of the platform or a runtime with a non-2xx status. Code and Message come
// from the platform's error envelope {"error":{"code","message"}} or from the runtime's
// {"error":"code","message"}. An answer without an envelope keeps Code empty and the start of its
// body as Message.
type Error struct {
	Status  int
	Code    string
	Message string
	// Field names the request member at fault, when the runtime's invalid_request says which.
	Field    string
	Problems []Problem
}

// Error renders the code, message and status, then each problem on its own line.
func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.Code != "" && e.Message != "":
		fmt.Fprintf(&b, "%s: %s", e.Code, e.Message)
	case e.Code != "":
		b.WriteString(e.Code)
	case e.Message != "":
		b.WriteString(e.Message)
	default:
		b.WriteString(http.StatusText(e.Status))
	}
	fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// responseError reads resp's body into an *Error.
func responseError(resp *http.Response) *Error {
	e := &Error{Status: resp.StatusCode}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil && len(body) == 0 {
		e.Message = "reading the error answer failed: " + err.Error()
		return e
	}
	var env struct {
		Error    json.RawMessage `json:"error"`
		Message  string          `json:"message"` // the runtime's envelope
		Field    string          `json:"field"`
		Problems []Problem       `json:"problems"`
	}
	if json.Unmarshal(body, &env) == nil && len(env.Error) > 0 {
		var obj struct {
			Code     string    `json:"code"`
			Message  string    `json:"message"`
			Problems []Problem `json:"problems"`
		}
		var s string
		switch {
		case json.Unmarshal(env.Error, &obj) == nil:
			e.Code, e.Message = obj.Code, obj.Message
			e.Problems = append(obj.Problems, env.Problems...)
			return e
		case json.Unmarshal(env.Error, &s) == nil:
			e.Code, e.Message, e.Field = s, env.Message, env.Field
			e.Problems = env.Problems
			return e
		}
	}
	e.Message = snippet(body)
	return e
}

// snippet returns the start of a non-JSON body as one line.
func snippet(body []byte) string {
	s := strings.Join(strings.Fields(string(body)), " ")
	const max = 300
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
