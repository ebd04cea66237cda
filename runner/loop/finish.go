package loop

import (
	"strconv"
	"strings"

	"svc/runner/models"
	"svc/runner/sse"
)

// finish ends a run that hit a limit (max_turns or budget_exceeded): one final model call
// streams a summary as ordinary text, and reason is kept (spec §6.3). Subagents and runs with
// a turn limit of 1 make no summary call; a failed or empty summary becomes a fixed message.
func (r *run) finish(reason Reason) Reason {
	if r.p.Subagent || r.maxTurns() == 1 {
		return reason
	}
	instruction := models.Message{Role: models.RoleUser, Content: summaryInstruction(reason, r.maxTurns())}
	resp, err := r.call([]models.Message{instruction})
	r.usage = r.usage.Add(resp.Usage)
	if r.ctx.Err() != nil {
		if len(r.text) > 0 {
			r.all = append(r.all, models.Message{Role: models.RoleAssistant, Content: string(r.text)})
		}
		return ReasonUserAbort
	}
	// Tool calls requested in this final turn are not run: only the text is kept.
	text := strings.TrimSpace(resp.Message.Content)
	if err != nil || text == "" {
		if err != nil {
			r.log.WarnContext(r.ctx, "final summary call failed", "err", err, "reason", reason)
		}
		r.fixedMessage(reason)
		return reason
	}
	r.all = append(r.all, models.Message{Role: models.RoleAssistant, Content: resp.Message.Content})
	return reason
}

// fixedMessage streams and records the message that names the limit a run hit.
func (r *run) fixedMessage(reason Reason) {
	text := FixedMessage(reason, r.maxTurns(), r.p.Budget)
	// A text already streamed by a failed summary stays; the fixed message follows it.
	if len(r.text) > 0 {
		text = "\n\n" + text
	}
	_ = r.emit(&sse.Frame{Type: sse.TypeTextDelta, Content: text})
	r.all = append(r.all, models.Message{Role: models.RoleAssistant, Content: string(r.text) + text})
}

// FixedMessage is the text streamed when a run stops on a limit and no summary is available.
func FixedMessage(reason Reason, maxTurns, budget int) string {
	if reason == ReasonBudgetExceeded {
		return "This conversation has used its token budget of " + strconv.Itoa(budget) +
			" tokens (max_session_tokens), so I have to stop here. Please start a new conversation to continue."
	}
	return "I stopped because I reached the limit of " + strconv.Itoa(maxTurns) +
		" model turns for one request (max_turns) before finishing. Say \"continue\" and I will pick up where I left off."
}

func summaryInstruction(reason Reason, maxTurns int) string {
	if reason == ReasonBudgetExceeded {
		return "[system] This conversation has reached its token budget and must stop now. Do not call any tools. " +
			"In a few sentences, tell the user what you have done so far, what is left to do, and that they need to " +
			"start a new conversation to continue."
	}
	return "[system] You have reached the limit of " + strconv.Itoa(maxTurns) + " model turns for this request and must stop now. " +
		"Do not call any tools. In a few sentences, tell the user what you have done so far, what is left to do, " +
		"and what they should say to let you continue."
}
