package main

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"svc/client"
)

// BenchmarkEvalsAfterReady measures issue 15's figure on svc up: for a push of the support-desk
// agent (on the fake OpenAI model of evalsflow_test.go, which answers at once and passes both
// evals), the wall time from the deployment's readyAt to the createdAt of its commit's svc/evals
// success status (both recorded by the platform, so the test's polling does not count), and the
// fake model's own time over the same run (the time its handler spent on the run's requests: 3
// chat and 2 judge calls). overhead = wall - model is the platform's own; reported per eval (2
// evals), p50 and max over b.N pushes, and the mean model time per eval. Target: overhead ≤ 100 ms
// per eval. Run with -benchtime=20x for 20 pushes.
func BenchmarkEvalsAfterReady(b *testing.B) {
	p := startPlatform(b)
	model := newFakeEvalModel(b, false, false)
	a := newEvalsAgent(b, p, "bench-desk", model, true)
	const evalsPerRun = 2
	var walls, overheads []time.Duration
	var modelTotal time.Duration
	b.ResetTimer()
	for i := range b.N {
		commit := a.commit(b, fmt.Sprint("push ", i), nil)
		_, _, before := model.counts()
		deployID := p.push(b, a.id, a.dir, evalsBranch, commit)
		var d client.Deployment
		for deadline := time.Now().Add(2 * time.Minute); d.ReadyAt == nil; time.Sleep(time.Millisecond) {
			if s := p.call(b, "GET", "/api/deployments/"+deployID, nil, nil, &d); s != 200 || d.Status == "failed" || time.Now().After(deadline) {
				b.Fatalf("deployment %s: %d %+v", deployID, s, d)
			}
		}
		var success commitStatusView
		for deadline := time.Now().Add(2 * time.Minute); success.State != "success"; time.Sleep(time.Millisecond) {
			list := evalStatuses(b, p, a.id, commit)
			if len(list) > 0 {
				success = list[len(list)-1]
			}
			if s := success.State; s == "failure" || s == "error" || time.Now().After(deadline) {
				b.Fatalf("svc/evals of %s: %+v", commit, list)
			}
		}
		_, _, after := model.counts()
		wall, spent := success.CreatedAt.Sub(*d.ReadyAt), after-before
		walls = append(walls, wall)
		overheads = append(overheads, wall-spent)
		modelTotal += spent
	}
	b.StopTimer()
	if chats, judges, _ := model.counts(); chats != 3*b.N || judges != 2*b.N {
		b.Fatalf("model calls: %d chat, %d judge for %d pushes", chats, judges, b.N)
	}
	perEval := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / evalsPerRun }
	b.ReportMetric(perEval(percentile(walls, 0.5)), "wall-p50-ms/eval")
	b.ReportMetric(perEval(modelTotal/time.Duration(b.N)), "model-ms/eval")
	b.ReportMetric(perEval(percentile(overheads, 0.5)), "overhead-p50-ms/eval")
	b.ReportMetric(perEval(slices.Max(overheads)), "overhead-max-ms/eval")
}
