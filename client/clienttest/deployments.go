package clienttest

import (
	"encoding/json"
	"io"
	"net/http"
	"sort"

	"svc/client"
)

func (p *Platform) redeploy(w http.ResponseWriter, r *http.Request) {
	var req client.RedeployRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, &client.Error{Status: 400, Code: client.CodeInvalidRequest, Message: "body: " + err.Error()})
		return
	}
	if _, ok := p.agent(req.AgentID); !ok {
		writeError(w, notFound("agent "+req.AgentID))
		return
	}
	env := req.Environment
	if env == "" {
		env = client.Production
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	plan := DefaultPlan()
	if p.buildPlan != nil {
		plan = p.buildPlan(req)
	}
	if req.ReuseBuild {
		for _, d := range p.list(req.AgentID, env) {
			if d.Status != client.StatusFailed && d.Status != client.StatusCancelled {
				writeJSON(w, 200, client.Redeploy{DeployID: d.DeployID, BuildID: d.BuildID, Environment: env, Reused: true})
				return
			}
			break
		}
	}
	d := &client.Deployment{DeployID: p.nextID("d"), BuildID: p.nextID("b"), AgentID: req.AgentID, Environment: env,
		Branch: req.Branch, SourceVersionID: req.SourceVersionID, Status: client.StatusQueued, CreatedAt: p.tick()}
	if req.SourceVersionID == "" {
		d.Commit = "0123456789abcdef0123456789abcdef01234567"
	}
	d.URL = p.pinnedURL(d)
	p.deployments = append(p.deployments, d)
	p.builds[d.BuildID] = &build{deploy: d, plan: plan, pending: plan.PendingReads,
		status: client.Build{BuildID: d.BuildID, Status: client.BuildQueued, Commit: d.Commit}}
	writeJSON(w, 200, client.Redeploy{DeployID: d.DeployID, BuildID: d.BuildID, Environment: env})
}

// run finishes a build that has not run yet: the steps, the deployment's status and, when the
// rules of spec 3.1 say so, its activation.
func (p *Platform) run(b *build) {
	if b.ran {
		return
	}
	b.ran = true
	start, end := p.tick(), p.tick()
	b.status.StartedAt, b.status.FinishedAt = &start, &end
	for _, name := range []string{"fetch", "validate", "compile", "pack", "upload"} {
		b.status.Steps = append(b.status.Steps, client.BuildStep{Name: name, Status: "succeeded", DurationMS: 5})
	}
	d := b.deploy
	if b.plan.Error != "" {
		b.status.Status, b.status.Error = client.BuildFailed, b.plan.Error
		b.status.Steps[1].Status = "failed"
		d.Status, d.Error = client.StatusFailed, b.plan.Error
		return
	}
	b.status.Status = client.BuildSucceeded
	d.Status, d.ReadyAt = client.StatusReady, &end
	if d.Environment != client.Production || p.settings[d.AgentID].AutoPromoteProduction {
		p.activate(d)
	}
}

func (p *Platform) logs(w http.ResponseWriter, r *http.Request, buildID string) {
	p.mu.Lock()
	b := p.builds[buildID]
	var lines []string
	if b != nil {
		p.run(b)
		lines = append(lines, b.plan.Log...)
	}
	p.mu.Unlock()
	if b == nil {
		writeError(w, notFound("build "+buildID))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(200)
	flusher, _ := w.(http.Flusher)
	follow := r.URL.Query().Get("follow") == "1"
	for _, line := range lines {
		if _, err := io.WriteString(w, line+"\n"); err != nil {
			return
		}
		if follow && flusher != nil {
			flusher.Flush()
		}
	}
}

func (p *Platform) promote(w http.ResponseWriter, r *http.Request) {
	var req client.PromoteRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, &client.Error{Status: 400, Code: client.CodeInvalidRequest, Message: "body: " + err.Error()})
		return
	}
	to := req.ToEnvironment
	if to == "" {
		to = client.Production
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, src := range p.list(req.AgentID, req.FromEnvironment) {
		if src.IsActive {
			d := &client.Deployment{DeployID: p.nextID("d"), BuildID: src.BuildID, AgentID: src.AgentID, Environment: to,
				Commit: src.Commit, Branch: src.Branch, SourceVersionID: src.SourceVersionID, Status: client.StatusReady, CreatedAt: p.tick()}
			d.ReadyAt, d.URL = &d.CreatedAt, p.pinnedURL(d)
			p.deployments = append(p.deployments, d)
			p.activate(d)
			writeJSON(w, 200, d)
			return
		}
	}
	writeError(w, &client.Error{Status: 422, Code: client.CodeBundleUnavailable, Message: "no active deployment in " + req.FromEnvironment})
}

func (p *Platform) rollback(w http.ResponseWriter, r *http.Request) {
	var req client.RollbackRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, &client.Error{Status: 400, Code: client.CodeInvalidRequest, Message: "body: " + err.Error()})
		return
	}
	env := req.Environment
	if env == "" {
		env = client.Production
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var target *client.Deployment
	if req.DeployID != "" {
		target = p.deployment(req.DeployID)
		if target == nil || target.AgentID != req.AgentID {
			writeError(w, notFound("deployment "+req.DeployID))
			return
		}
	} else {
		var cands []*client.Deployment
		for _, d := range p.deployments {
			if d.AgentID == req.AgentID && d.Environment == env && !d.IsActive && d.Status == client.StatusReady && d.ActivatedAt != nil {
				cands = append(cands, d)
			}
		}
		sort.Slice(cands, func(i, j int) bool { return cands[i].ActivatedAt.After(*cands[j].ActivatedAt) })
		if len(cands) > 0 {
			target = cands[0]
		}
	}
	if target == nil || target.Status != client.StatusReady {
		writeError(w, &client.Error{Status: 422, Code: client.CodeNothingToRollBack, Message: "no earlier deployment of " + env + " qualifies"})
		return
	}
	p.activate(target)
	writeJSON(w, 200, target)
}
