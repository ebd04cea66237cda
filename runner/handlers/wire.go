package handlers

import (
	"encoding/json"

	"svc/runner/durable"
)

// The frames between a runner (the host side, host.go) and a sandbox worker (worker.go), each
// a message in a sandbox frame, encoded as codec.go says. A call is one "call" from the host,
// answered by one "done"; while it runs, the worker asks for what lies outside it ("rpc",
// answered by one "reply") and sends what needs no answer ("emit", "record"). The host may send
// "cancel" (the deadline passed, or the caller left) and "stop" (a journal write failed) at any
// time, on the worker's control pipe (sandbox.Proc.Control), naming the call by its Loan: the
// other frames go over stdin and stdout, one at a time each way, read by whoever waits for them.
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
	Op      string
	Call    *callSpec
	Digest  string
	JS      string
	Seq     uint64
	Loan    uint64 // call, cancel, stop: the call's sandbox.Proc.Loan
	Method  string
	Name    string
	Task    string
	Args    json.RawMessage
	Files   []string
	Key     string
	Value   json.RawMessage
	Error   string
	Stop    bool
	Frame   *emitFrame
	Outcome *outcome
}

// callSpec is what a worker needs to run one call.
type callSpec struct {
	Tool       string
	Digest     string
	SourcePath string
	Layout     string
	UsesTools  []string
	UsesAgents []string
	Children   bool // ctx.callTool is bound
	Subagents  bool

	MaxResultBytes int
	MaxLogLines    int
	MaxLogBytes    int
	MaxDepth       int
	Depth          int // 1 for a call of the model, more for children

	ID        string
	SessionID string
	Args      json.RawMessage
	Files     []fileInfo // the turn's attachments, without data

	Durable  bool
	Recorded map[string]json.RawMessage
}

// fileInfo describes one attachment of the turn; its data is fetched when the handler reads
// ctx.attachments.
type fileInfo struct {
	Filename string
	MimeType string
	Delivery string
	Size     int
}

// emitFrame is a frame a handler sends to the client.
type emitFrame struct {
	Type           string
	Message        string
	RunningLabel   string
	CompletedLabel string
	WidgetType     string          // widget
	Data           json.RawMessage // widget: checked JSON
}

// outcome is how a call ended: a result, a pause, or an error.
type outcome struct {
	Content string
	Data    json.RawMessage
	Pause   *durable.Pause
	Err     *wireError
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
	Kind    string
	Message string
	Tool    string // errThrew: the *Error's fields
	File    string
	Line    int
	Column  int
}
