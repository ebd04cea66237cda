package runtime_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"svc/agent"
	"svc/agent/agenttest"
	"svc/runner/durable"
	"svc/runner/durable/engine"
	"svc/runner/models/modelstest"
	"svc/runner/runtime"
)

// specialistAgent's models.main is OpenAI with no key anywhere; its tool ask hands a task (and
// the turn's files) to the specialist helper.
func specialistAgent(t *testing.T) *agent.Agent {
	t.Helper()
	dir := agenttest.Write(t, map[string]string{
		"svc.json":                  `{"name": "spec", "version": "1", "models": {"main": {"provider": "openai", "model": "gpt-4.1-mini"}}}`,
		"agents/default/AGENT.md":   "You are the desk.",
		"agents/default/agent.json": `{"name": "default", "tools": ["ask"]}`,
		"agents/helper/AGENT.md":    "You help.",
		"svc/tools/ask/tool.json":   `{"name": "ask", "parameters": {"type": "object", "properties": {"files": {"type": "array", "items": {"type": "string"}}}}, "uses": {"subagents": ["helper"]}}`,
		"svc/tools/ask/handler.ts":  "export default async function (p: any, ctx: any) {\n  return await ctx.callSubagent(\"helper\", \"Say hi.\", undefined, { attachments: p.files || [] });\n}\n",
	})
	ag, err := agent.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ag
}

// A specialist runs on the session's model (spec 2.5 model): a session on the echo model whose
// tool asks a specialist works with no API key set anywhere, where models.main (OpenAI) would
// need one.
func TestSpecialistOnSessionModel(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	e := start(t, runtime.Options{Agent: specialistAgent(t)}) // the default Models, with no environment
	fs := e.chat("", map[string]any{"message": `/tool ask {}`, "model": map[string]any{"provider": "echo"}})
	res := ofType(fs, "tool_call_result")
	if len(res) != 1 || res[0].Data["status"] != "success" || res[0].Data["content"] != "echo: Say hi." {
		t.Fatalf("ask: %v; frames %v", res, types(fs))
	}
	if d := done(t, fs); d["reason"] != "model_stop" {
		t.Errorf("done %v", d)
	}
	// The session keeps its model: its next turn's specialist runs on echo too.
	fs = e.chat("", map[string]any{"message": `/tool ask {}`, "session_id": sessionOf(t, fs)})
	if res := ofType(fs, "tool_call_result"); len(res) != 1 || res[0].Data["status"] != "success" {
		t.Errorf("second turn of the echo session: %v", res)
	}
}

// A file the specialist's model cannot take is left off its message with a warning frame; the
// specialist runs with the rest (spec 4.7).
func TestSpecialistFileLeftOff(t *testing.T) {
	model := modelstest.NewOpenAIServer(t,
		modelstest.Turn{ToolCalls: []modelstest.ToolCall{{ID: "a1", Name: "ask", Arguments: `{"files": ["notes.txt", "broken.docx"]}`}}},
		modelstest.Turn{Text: []string{"Hi."}},
		modelstest.Turn{Text: []string{"done"}})
	e := start(t, runtime.Options{Agent: specialistAgent(t), Models: openaiModels(model)})
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	fs := e.chat("", map[string]any{"message": "ask the helper", "attachments": []any{
		map[string]any{"mimeType": "text/plain", "data": b64("hello from the notes"), "filename": "notes.txt", "delivery": "context"},
		// Kept for tools (delivery context), so never converted at the request: not a zip.
		map[string]any{"mimeType": "application/vnd.openxmlformats-officedocument.wordprocessingml.document", "data": b64("not a zip"), "filename": "broken.docx", "delivery": "context"},
	}})
	res := ofType(fs, "tool_call_result")
	if len(res) != 1 || res[0].Data["status"] != "success" || res[0].Data["content"] != "Hi." {
		t.Fatalf("ask: %v; frames %v", res, types(fs))
	}
	var warnings []string
	for _, w := range ofType(fs, "warning") {
		warnings = append(warnings, str(w.Data["message"]))
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "attachment broken.docx was left off the message of specialist helper: cannot convert broken.docx") {
		t.Errorf("warnings %q", warnings)
	}
	reqs := model.Requests()
	if len(reqs) < 2 || !strings.Contains(string(reqs[1].Body), "hello from the notes") || strings.Contains(string(reqs[1].Body), b64("not a zip")) {
		t.Errorf("the specialist's request should hold notes.txt and not broken.docx: %d requests", len(reqs))
	}
}

// A durable tool's specialist runs on the model of the session that started the run, after a
// resume too: the run keeps the session's choice (echo here), so models.main (OpenAI, no key
// anywhere) is never called.
func TestDurableSpecialistOnSessionModel(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	dir := agenttest.Write(t, map[string]string{
		"svc.json":                  `{"name": "spec", "version": "1", "models": {"main": {"provider": "openai", "model": "gpt-4.1-mini"}}}`,
		"agents/default/AGENT.md":   "You are the desk.",
		"agents/default/agent.json": `{"name": "default", "tools": ["flow"]}`,
		"agents/helper/AGENT.md":    "You help.",
		"svc/tools/flow/tool.json":  `{"name": "flow", "execution": "durable", "parameters": {"type": "object", "properties": {}}, "uses": {"subagents": ["helper"]}}`,
		"svc/tools/flow/handler.ts": "export default async function (p: any, ctx: any) {\n  await ctx.requestInput({question: \"go?\", inputType: \"yesno\"});\n  return await ctx.callSubagent(\"helper\", \"Say hi.\");\n}\n",
	})
	ag, err := agent.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	runs := &durable.Memory{}
	e := start(t, runtime.Options{Agent: ag, Durable: durableEngine(t, engine.Config{Store: runs})})
	fs := e.chat("", map[string]any{"message": `/tool flow {}`, "model": map[string]any{"provider": "echo"}})
	req := ofType(fs, "durable_approval_required")
	if len(req) != 1 {
		t.Fatalf("frames %v", types(fs))
	}
	id := str(req[0].Data["session_id"])
	if run, _ := runs.Get(t.Context(), "", id); run.Model.Provider != "echo" {
		t.Errorf("the run keeps model %+v, want the session's echo", run.Model)
	}
	if r := e.do("POST", "/api/sessions/"+id+"/answer", "", map[string]any{"value": true}); r.Status != 200 {
		t.Fatalf("answer: %d %s", r.Status, r.Body)
	}
	if run := waitRun(t, runs, id, durable.Completed); string(run.Result) != `"echo: Say hi."` {
		t.Errorf("result %s (error %q)", run.Result, run.Error)
	}
}
