package handlers

import (
	"encoding/json"

	"svc/runner/durable"
)

// The frames between a runner (the host side, host.go) and a sandbox worker (worker.go), as
// JSON in sandbox frames. A call is one "call" from the host, answered by one "done"; while it
// runs, the worker asks for what lies outside it ("rpc", answered by one "reply") and sends what
// needs no answer ("emit", "record"). The host may send "cancel" (the deadline passed, or the
// caller left) and "stop" (a journal write failed) at any time, on the worker's control pipe
// (sandbox.Proc.Control), naming the call by its Loan: the other frames go over stdin and
// stdout, one at a time each way, read by whoever waits for them.
const (
	opReady  = "ready"  // worker → host, once: it serves
	opCall   = "call"   // host → worker: run a call
	opNeed   = "need"   // worker → host: the JavaScript of Digest, please
	opJS     = "js"     // host → worker: the JavaScript of Digest
	opEmit   = "emit"   // worker → host: a frame for the client
	opRecord = "record" // worker → host: a journal entry (Key, Value)
	opRPC    = "rpc"    // worker → host: Method, answered by a reply of the same Seq
	opReply  = "reply"  // host → worker: Value, or Error (Stop: the execution must end)
	opCancel = "cancel" // host → worker: interrupt the call
	opStop   = "stop"   // host → worker: a journal write failed; interrupt the call
	opDone   = "done"   // worker → host: the call's Outcome
)

// Methods of rpc frames.
const (
	rpcCallTool     = "callTool"     // Name, Args → the child's result as JSON
	rpcCallSubagent = "callSubagent" // Name, Task, Args (input), Files → the answer as a JSON string
	rpcFlush        = "flush"        // make the journal durable
	rpcNow          = "now"          // → the journal's clock, as a JSON string (RFC 3339)
	rpcFiles        = "files"        // → ctx.attachments as JSON
)

// message is one frame.
type message struct {
	Op      string          `json:"op"`
	Call    *callSpec       `json:"call,omitempty"`
	Digest  string          `json:"digest,omitempty"`
	JS      string          `json:"js,omitempty"`
	Seq     uint64          `json:"seq,omitempty"`
	Loan    uint64          `json:"loan,omitempty"` // call, cancel, stop: the call's sandbox.Proc.Loan
	Method  string          `json:"method,omitempty"`
	Name    string          `json:"name,omitempty"`
	Task    string          `json:"task,omitempty"`
	Args    json.RawMessage `json:"args,omitempty"`
	Files   []string        `json:"files,omitempty"`
	Key     string          `json:"key,omitempty"`
	Value   json.RawMessage `json:"value,omitempty"`
	Error   string          `json:"error,omitempty"`
	Stop    bool            `json:"stop,omitempty"`
	Frame   *emitFrame      `json:"frame,omitempty"`
	Outcome *outcome        `json:"outcome,omitempty"`
}

// callSpec is what a worker needs to run one call.
type callSpec struct {
	Tool       string   `json:"tool"`
	Digest     string   `json:"digest"`
	SourcePath string   `json:"source_path"`
	Layout     string   `json:"layout,omitempty"`
	UsesTools  []string `json:"uses_tools,omitempty"`
	UsesAgents []string `json:"uses_agents,omitempty"`
	Children   bool     `json:"children,omitempty"` // ctx.callTool is bound
	Subagents  bool     `json:"subagents,omitempty"`

	MaxResultBytes int `json:"max_result_bytes"`
	MaxLogLines    int `json:"max_log_lines"`
	MaxLogBytes    int `json:"max_log_bytes"`
	MaxDepth       int `json:"max_depth"`
	Depth          int `json:"depth"` // 1 for a call of the model, more for children

	ID        string          `json:"id"`
	SessionID string          `json:"session_id,omitempty"`
	Args      json.RawMessage `json:"args,omitempty"`
	Files     []fileInfo      `json:"files,omitempty"` // the turn's attachments, without data

	Durable  bool                       `json:"durable,omitempty"`
	Recorded map[string]json.RawMessage `json:"recorded,omitempty"`
}

// fileInfo describes one attachment of the turn; its data is fetched when the handler reads
// ctx.attachments.
type fileInfo struct {
	Filename string `json:"filename"`
	MimeType string `json:"mimeType"`
	Delivery string `json:"delivery"`
	Size     int    `json:"size"`
}

// emitFrame is a frame a handler sends to the client.
type emitFrame struct {
	Type           string `json:"type"`
	Message        string `json:"message,omitempty"`
	RunningLabel   string `json:"running_label,omitempty"`
	CompletedLabel string `json:"completed_label,omitempty"`
}

// outcome is how a call ended: a result, a pause, or an error.
type outcome struct {
	Content string          `json:"content,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	Pause   *durable.Pause  `json:"pause,omitempty"`
	Err     *wireError      `json:"err,omitempty"`
}

// Kinds of wireError.
const (
	errThrew       = "threw"         // an *Error
	errInterrupted = "interrupted"   // cancelled by the host: it knows why
	errBadArgs     = "bad_arguments" // wraps tools.ErrBadArguments
	errTooBig      = "too_big"       // wraps ErrResultTooBig
	errNotSettled  = "not_settled"   // wraps ErrNotSettled
	errOther       = "other"
)

// wireError is an error of a call as it crosses to the host.
type wireError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
	Tool    string `json:"tool,omitempty"` // errThrew: the *Error's fields
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
}
