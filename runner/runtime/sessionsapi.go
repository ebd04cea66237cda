package runtime

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"svc/auth"
	"svc/runner/access"
	"svc/runner/approvals"
	"svc/runner/models"
	"svc/runner/sessions"
	"svc/runner/turn"
)

// historyRoutes serve a runtime's chat sessions: prepare, list, read, rename, delete, queue a
// message, answer an approval. Each is a thin call to the turn engine, which acquires sessions.
type historyRoutes struct {
	turns         *turn.Engine
	store         sessions.Store
	hub           *approvals.Hub
	agentID       string
	idle          time.Duration
	now           func() time.Time
	scopeRequired bool // svc.json's scope.requireScope applies (local routes only; requireScope)
}

// prepareBody is the body of POST /sessions (spec §4.3).
type prepareBody struct {
	Agent            string            `json:"agent"`
	Skill            string            `json:"skill"`
	DeployID         string            `json:"deploy_id"`
	MaxSessionTokens *int64            `json:"max_session_tokens"`
	Model            *modelChoice      `json:"model"`
	ScopeID          string            `json:"scope_id"`
	Context          map[string]string `json:"context"`
	Metadata         map[string]string `json:"metadata"`
}

// prepare serves POST /sessions: a live session, stored at its first turn.
func (h *historyRoutes) prepare(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	var body prepareBody
	if r.ContentLength != 0 {
		if err := readJSON(w, r, &body); err != nil {
			return err
		}
	}
	if err := checkCommon(body.ScopeID, body.Metadata, body.Model, body.MaxSessionTokens); err != nil {
		return err
	}
	if err := requireScope(h.scopeRequired, who, body.ScopeID); err != nil {
		return err
	}
	id, err := h.turns.Prepare(who, body.settings())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, map[string]any{"session_id": id, "idle_ttl_ms": h.idle.Milliseconds()})
	return nil
}

// historyItem is a session in history answers (CONTRACT §6).
type historyItem struct {
	SessionID string            `json:"session_id"`
	Title     string            `json:"title"`
	ScopeID   string            `json:"scope_id"`
	Agent     string            `json:"agent"`
	Skill     string            `json:"skill"`
	Owner     string            `json:"owner"`
	Status    string            `json:"status"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
	Metadata  map[string]string `json:"metadata"`
	Usage     *usageBody        `json:"usage,omitempty"`
	Model     *sessions.Model   `json:"model,omitempty"`
	Budget    int               `json:"max_session_tokens,omitempty"`
	// StoredBytes is what the history holds against the session's storage bound (detail only).
	StoredBytes int64            `json:"stored_bytes,omitempty"`
	Messages    []historyMessage `json:"messages,omitempty"`
}

type usageBody struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	CachedTokens int `json:"cached_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// historyMessage is one message of a history detail. Attachment bytes are not sent back.
type historyMessage struct {
	Seq         int                `json:"seq"`
	Role        string             `json:"role"`
	Content     string             `json:"content"`
	Thinking    string             `json:"thinking,omitempty"`
	ToolCalls   []models.ToolCall  `json:"tool_calls,omitempty"`
	ToolCallID  string             `json:"tool_call_id,omitempty"`
	ToolName    string             `json:"tool_name,omitempty"`
	IsError     bool               `json:"is_error,omitempty"`
	Interrupted bool               `json:"interrupted,omitempty"`
	Attachments []attachmentDigest `json:"attachments,omitempty"`
	At          time.Time          `json:"at"`
}

type attachmentDigest struct {
	MimeType string `json:"mimeType"`
	Filename string `json:"filename,omitempty"`
	Size     int    `json:"size"`
}

func item(s *sessions.Session, detail bool) historyItem {
	it := historyItem{
		SessionID: s.ID, Title: s.Title, ScopeID: s.ScopeID, Agent: s.Agent, Skill: s.Skill, Owner: s.Owner,
		Status: s.Status, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt, Metadata: s.Metadata,
	}
	if it.Metadata == nil {
		it.Metadata = map[string]string{}
	}
	if !detail {
		return it
	}
	it.Usage = &usageBody{s.Usage.InputTokens, s.Usage.OutputTokens, s.Usage.CachedTokens, s.Usage.Total()}
	if !s.Model.IsZero() {
		m := s.Model
		it.Model = &m
	}
	it.Budget, it.StoredBytes = s.MaxSessionTokens, s.StoredBytes
	it.Messages = make([]historyMessage, 0, len(s.Messages))
	for i, e := range s.Messages {
		hm := historyMessage{
			Seq: i, Role: string(e.Role), Content: e.Content, Thinking: e.Thinking, ToolCalls: e.ToolCalls,
			ToolCallID: e.ToolCallID, ToolName: e.ToolName, IsError: e.IsError, Interrupted: e.Interrupted, At: e.At,
		}
		for _, p := range e.Parts {
			hm.Attachments = append(hm.Attachments, attachmentDigest{p.MimeType, p.Filename, max(p.Size, len(p.Data))})
		}
		it.Messages = append(it.Messages, hm)
	}
	return it
}

// list serves GET /sessions/history: up to 500 rows, then ownership filtering (spec
// §4.6 rule 4: fewer visible sessions can be returned even when more accessible ones exist).
func (h *historyRoutes) list(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	scope := r.URL.Query().Get("scope_id")
	if who.Scope != "" {
		scope = who.Scope // the claim overrides the query
	}
	q := sessions.Query{AgentID: h.agentID, ScopeID: scope, Limit: sessions.DefaultListLimit}
	// The metadata keys of spec 2.6 filter the list.
	for _, key := range []string{"userId", "screen"} {
		if v := r.URL.Query().Get(key); v != "" {
			if q.Metadata == nil {
				q.Metadata = map[string]string{}
			}
			q.Metadata[key] = v
		}
	}
	list, err := h.store.List(r.Context(), q)
	if err != nil {
		return err
	}
	items := make([]historyItem, 0, len(list))
	for _, s := range list {
		if who.Sees(s.Owner, s.ScopeID) {
			items = append(items, item(s, false))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": items})
	return nil
}

// visible returns a copy of the session of the path's id for a read: 404 when it is missing or
// hidden from c, the same answer for both (rule 2).
func visible(turns *turn.Engine, r *http.Request, who access.Identity) (*sessions.Session, error) {
	id, err := pathSessionID(r)
	if err != nil {
		return nil, err
	}
	return turns.Get(r.Context(), who, id)
}

// pathSessionID is the session id of the path: a malformed one is 404, as no session has it.
func pathSessionID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if checkSessionID("id", id) != nil {
		return "", apiErr(CodeNotFound)
	}
	return id, nil
}

// get serves GET /sessions/history/{id}.
func (h *historyRoutes) get(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	s, err := visible(h.turns, r, who)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, item(s, true))
	return nil
}

type patchBody struct {
	Title    *string           `json:"title"`
	Metadata map[string]string `json:"metadata"`
}

// patch serves PATCH /sessions/history/{id}: title and metadata (latest value per key).
func (h *historyRoutes) patch(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	var body patchBody
	if err := readJSON(w, r, &body); err != nil {
		return err
	}
	if body.Title != nil && utf8.RuneCountInString(*body.Title) > MaxTitleLen {
		return invalid("title", "at most %d characters", MaxTitleLen)
	}
	if err := checkMetadata("metadata", body.Metadata); err != nil {
		return err
	}
	id, err := pathSessionID(r)
	if err != nil {
		return err
	}
	s, err := h.turns.Update(r.Context(), who, id, func(s *sessions.Session) error {
		merged := turn.MergeMetadata(s.Metadata, body.Metadata)
		if len(merged) > MaxMetadataKeys {
			return invalid("metadata", "the session would hold %d keys; at most %d", len(merged), MaxMetadataKeys)
		}
		s.Metadata = merged
		if body.Title != nil {
			s.Title = *body.Title
		}
		s.UpdatedAt = h.now()
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, item(s, false))
	return nil
}

// delete serves DELETE /sessions/history/{id}; a session whose turn runs is 409.
func (h *historyRoutes) delete(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	id, err := pathSessionID(r)
	if err != nil {
		return err
	}
	if err := h.turns.Delete(r.Context(), who, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// answerBody is the body of POST /chat/sessions/{id}/ask-user-response.
type answerBody struct {
	CorrelationID string `json:"correlation_id"`
	AskID         string `json:"ask_id"`
	Approved      *bool  `json:"approved"`
}

// answerApproval serves POST /chat/sessions/{id}/ask-user-response: the user's answer to a
// confirmation_required of the session's running turn, which may run in another runtime.
func (h *historyRoutes) answerApproval(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	var body answerBody
	if err := readJSON(w, r, &body); err != nil {
		return err
	}
	id := cmp.Or(body.CorrelationID, body.AskID)
	switch {
	case id == "":
		return invalid("correlation_id", "is required (or ask_id): the correlation_id of the confirmation_required frame")
	case body.Approved == nil:
		return invalid("approved", "is required: true or false")
	}
	s, err := visible(h.turns, r, who)
	if err != nil {
		return err
	}
	status := approvals.Denied
	if *body.Approved {
		status = approvals.Approved
	}
	a, err := h.hub.Decide(r.Context(), h.agentID, s.ID, id, status)
	switch {
	case errors.Is(err, approvals.ErrNotFound):
		return &APIError{Code: CodeNotFound, Message: fmt.Sprintf("session %s has no approval %q", s.ID, id)}
	case errors.Is(err, approvals.ErrDecided):
		return &APIError{Code: CodeAlreadyAnswered, Message: fmt.Sprintf("approval %s is %s already", id, a.Status)}
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": a.Status})
	return nil
}

type queueBody struct {
	Message *string `json:"message"`
}

// queue serves POST /chat/sessions/{id}/messages: a message into the running turn,
// which the loop reads between steps (202), or 409 no_active_turn.
func (h *historyRoutes) queue(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	var body queueBody
	if err := readJSON(w, r, &body); err != nil {
		return err
	}
	if body.Message == nil || *body.Message == "" {
		return invalid("message", "is required")
	}
	if n := utf8.RuneCountInString(*body.Message); n > MaxQueuedLen {
		return invalid("message", "%d characters; at most %d", n, MaxQueuedLen)
	}
	id, err := pathSessionID(r)
	if err != nil {
		return err
	}
	if err := h.turns.Queue(r.Context(), who, id, *body.Message); err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"status": "queued", "message_id": auth.NewID("msg_")})
	return nil
}
