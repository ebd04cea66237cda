package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"svc/auth"
	"svc/registry"
)

type buildStep struct {
	Name       string `json:"name"`
	Status     string `json:"status"`
	DurationMs int64  `json:"durationMs"`
}

// buildStatusResponse is the build status of CONTRACT §3.
type buildStatusResponse struct {
	BuildID     string      `json:"buildId"`
	DeployID    string      `json:"deployId"`
	Status      string      `json:"status" enum:"queued,running,succeeded,failed,cancelled"`
	Environment string      `json:"environment"`
	Commit      string      `json:"commit"`
	Branch      string      `json:"branch"`
	Trigger     string      `json:"trigger"`
	Attempts    int         `json:"attempts"`
	StartedAt   *time.Time  `json:"startedAt"`
	FinishedAt  *time.Time  `json:"finishedAt"`
	Error       string      `json:"error,omitempty"`
	Steps       []buildStep `json:"steps"`
	Warnings    []string    `json:"warnings" doc:"what the build found that does not fail it: each env: reference of the agent that is neither an agent secret nor set in the builder's environment, with where it is used and how to set it"`
}

// followPoll is how often a followed build log looks for new lines.
const followPoll = 100 * time.Millisecond

func (a *API) buildRoutes() []Route {
	return []Route{
		{Method: http.MethodGet, Path: "/api/builds/:buildId/status", Need: auth.Observer, Summary: "A build's progress and steps",
			Response: buildStatusResponse{}, Handle: a.buildStatus},
		{Method: http.MethodGet, Path: "/api/builds/:buildId/logs", Need: auth.Observer,
			Summary:      "A build's log, one line per event ([step] message); ?follow=1 streams until the build ends",
			ResponseType: "text/plain", Handle: a.buildLogs},
	}
}

// buildOf loads the :buildId build and applies the caller's agent binding.
func (a *API) buildOf(c *gin.Context) (registry.Build, error) {
	b, err := a.deployments.GetBuild(c.Request.Context(), c.Param("buildId"))
	if err != nil {
		return registry.Build{}, err
	}
	if _, err := a.authorizeAgent(c, b.AgentID); err != nil {
		return registry.Build{}, registry.ErrBuildNotFound // a token bound elsewhere must not learn it exists
	}
	return b, nil
}

func (a *API) buildStatus(c *gin.Context) error {
	b, err := a.buildOf(c)
	if err != nil {
		return err
	}
	var steps []buildStep
	if err := json.Unmarshal([]byte(b.Steps), &steps); err != nil || steps == nil {
		steps = []buildStep{}
	}
	var warnings []string
	if err := json.Unmarshal([]byte(b.Warnings), &warnings); err != nil || warnings == nil {
		warnings = []string{}
	}
	return writeJSON(c, http.StatusOK, buildStatusResponse{
		BuildID: b.ID, DeployID: b.DeployID, Status: b.Status, Environment: b.Environment, Commit: b.CommitSHA, Branch: b.Branch,
		Trigger: b.Trigger, Attempts: b.Attempts, StartedAt: utcPtr(b.StartedAt), FinishedAt: utcPtr(b.FinishedAt), Error: b.Error, Steps: steps,
		Warnings: warnings,
	})
}

func finished(status string) bool {
	return status == registry.BuildSucceeded || status == registry.BuildFailed || status == registry.BuildCancelled
}

// buildLogs writes the log as text; with follow=1 it keeps the response open, flushing each new
// line, until the build has finished and every line is out (or the client leaves).
func (a *API) buildLogs(c *gin.Context) error {
	b, err := a.buildOf(c)
	if err != nil {
		return err
	}
	follow := c.Query("follow") == "1" || c.Query("follow") == "true"
	ctx := c.Request.Context()
	w := c.Writer
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	seq := 0
	ticker := time.NewTicker(followPoll)
	defer ticker.Stop()
	for {
		done := finished(b.Status)
		lines, err := a.buildLogStore.After(ctx, b.ID, seq, 0)
		if err != nil {
			a.deps.Logger.ErrorContext(ctx, "read build log", "build_id", b.ID, "err", err)
			return nil // the status line is out; the client sees the log end
		}
		for _, l := range lines {
			if _, err := fmt.Fprintf(w, "%s [%s] %s\n", l.CreatedAt.UTC().Format(time.RFC3339Nano), l.Step, l.Line); err != nil {
				return nil // the client left
			}
			seq = l.Seq
		}
		w.Flush()
		if !follow || (done && len(lines) == 0) {
			return nil
		}
		if len(lines) > 0 {
			continue // drain before waiting
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		if b, err = a.deployments.GetBuild(ctx, b.ID); err != nil {
			return nil
		}
	}
}
