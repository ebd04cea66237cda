package loop

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"svc/runner/models"
	"svc/runner/sse"
)

// Estimate returns a rough token count of a request: characters / 4, plus a little per
// message and 1,000 per attachment. It only has to be good enough to trigger compaction.
func Estimate(req *models.Request) int {
	n := len(req.System)
	for i := range req.Messages {
		m := &req.Messages[i]
		n += len(m.Content) + len(m.Thinking) + 16
		for _, tc := range m.ToolCalls {
			n += len(tc.Name) + len(tc.Arguments) + 16
		}
		n += len(m.Parts) * 1000 * charsPerToken
	}
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	return n / charsPerToken
}

// maybeCompact summarises the older turns when the next request would fill more than 90% of
// the context window, keeping the latest 6 user turns verbatim (spec §8).
func (r *run) maybeCompact() {
	if r.compactFails >= compactMaxFails {
		return
	}
	threshold := r.window * compactPercent / 100
	// Fast path: the view without clearing is an upper bound of the request.
	upper := Estimate(&models.Request{System: r.p.System, Messages: r.all[r.start:], Tools: r.p.Tools.Specs()}) + len(r.summary)/charsPerToken + 32
	if upper <= threshold {
		return
	}
	req := r.request(nil)
	est := Estimate(&req)
	if est <= threshold {
		return
	}
	msgs := r.all[r.start:]
	split, users := -1, 0
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == models.RoleUser {
			users++
			if users == compactKeepUsers {
				split = i
				break
			}
		}
	}
	if split <= 0 {
		return // nothing older than the turns that are kept
	}
	_ = r.emit(&sse.Frame{Type: sse.TypeCompactionStart, EstimatedTokens: est, Threshold: threshold})
	summary, usage, err := r.summarise(msgs[:split])
	r.usage = r.usage.Add(usage)
	if err != nil {
		r.compactFails++
		r.log.WarnContext(r.ctx, "context compaction failed", "err", err, "failures", r.compactFails)
		msg := "context compaction failed; continuing with the full history: " + err.Error()
		if r.compactFails >= compactMaxFails {
			msg += " (compaction is off for the rest of this run after " + strconv.Itoa(compactMaxFails) + " failures)"
		}
		_ = r.emit(&sse.Frame{Type: sse.TypeWarning, Message: msg})
		return
	}
	r.compactFails = 0
	r.start += split
	r.summary = summary
	r.compacted = true
	after := r.request(nil)
	_ = r.emit(&sse.Frame{Type: sse.TypeCompactionEnd, TokensBefore: est, TokensAfter: Estimate(&after), CompactionTokens: usage.Total()})
}

const compactionSystem = "You condense conversations. Write a faithful summary of the conversation you are given, " +
	"for the assistant that continues it: the user's goals, facts and decisions, what tools returned that still " +
	"matters, and what is still open. Be concise; use at most about 3,000 words. Write only the summary."

// summarise asks the session's model for a summary of msgs (and of the summary before them).
func (r *run) summarise(msgs []models.Message) (string, models.Usage, error) {
	var b strings.Builder
	if r.summary != "" {
		b.WriteString("Summary of what came before:\n")
		b.WriteString(r.summary)
		b.WriteString("\n\n")
	}
	b.WriteString("Conversation to summarise:\n")
	for i := range msgs {
		m := &msgs[i]
		switch m.Role {
		case models.RoleUser:
			b.WriteString("\nUser: ")
			b.WriteString(m.Content)
		case models.RoleAssistant:
			if m.Content != "" {
				b.WriteString("\nAssistant: ")
				b.WriteString(m.Content)
			}
			for _, tc := range m.ToolCalls {
				b.WriteString("\nAssistant called tool ")
				b.WriteString(tc.Name)
				b.WriteString(" with ")
				b.Write(tc.Arguments)
			}
		case models.RoleTool:
			b.WriteString("\nTool ")
			b.WriteString(m.ToolName)
			b.WriteString(" returned: ")
			b.WriteString(truncate(m.Content, 2000))
		}
	}
	req := models.Request{
		Model: r.p.Model, System: compactionSystem, MaxTokens: compactMaxTokens,
		Messages: []models.Message{{Role: models.RoleUser, Content: b.String()}},
	}
	span := r.startModelSpan("summarize")
	resp, err := r.p.Provider.Stream(r.ctx, req, func(models.Event) error { return nil })
	r.endModelSpan(span, "summarize", resp.Usage, err)
	if err != nil {
		return "", resp.Usage, err
	}
	text := strings.TrimSpace(resp.Message.Content)
	if text == "" {
		return "", resp.Usage, errors.New("the model returned no summary")
	}
	return truncate(text, summaryCharsLimit), resp.Usage, nil
}

// truncate cuts s to at most n bytes at a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + " […]"
}
