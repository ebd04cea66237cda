package clienttest

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/client"
)

// Token is the automation token the fake platform accepts.
const Token = "pk_clienttest"

// AppsDomain is the domain under which the fake serves agent runtimes.
const AppsDomain = "apps.localhost"

// Plan decides how one build of the fake goes.
type Plan struct {
	// Log is the build log, one line per entry, streamed in order.
	Log []string
	// Error, when not empty, fails the build with it (one problem per line, like the builder).
	Error string
	// PendingReads is how many reads of the deployment answer "building" after the build has
	// run, before the deployment settles (exercises a client's polling).
	PendingReads int
}

// DefaultPlan is the plan of a build that succeeds through the builder's steps.
func DefaultPlan() Plan {
	return Plan{Log: []string{
		"[start] build started",
		"[fetch] fetched the source",
		"[validate] source sha256:00: 3 files",
		"[validate] agent hello 1.0.0: 0 tools",
		"[compile] no tools to compile",
		"[pack] bundle sha256:11: 900 bytes",
		"[upload] uploaded bundles/hello/11.tar.zst",
		"[done] deployment ready",
	}}
}

// Platform is an in-memory fake of the platform API (CONTRACT §3) and of agent runtimes behind it
// (spec §4.2), served by one listener the way the real one is (CONTRACT §2): a Host of
// <slug>.apps.localhost or <deployId>--<slug>.apps.localhost reaches the runtime. A build runs
// when it is first looked at (its log, its status or its deployment). Safe for concurrent use.
type Platform struct {
	// Server is the fake's listener; its URL is the platform URL.
	Server *httptest.Server

	mu          sync.Mutex
	buildPlan   func(req client.RedeployRequest) Plan
	chat        func(req client.ChatRequest, write func(chunk string))
	now         time.Time
	seq         int
	agents      []client.Agent
	settings    map[string]client.DeploySettings
	deployments []*client.Deployment // oldest first
	builds      map[string]*build
	sources     map[string]map[string]string
	runtime     map[string]bool // minted runtime tokens
	chats       []client.ChatRequest
	refusals    map[string]*client.Error
}

type build struct {
	status  client.Build
	deploy  *client.Deployment
	plan    Plan
	ran     bool
	pending int
}

// New starts a fake platform that is closed when t ends.
func New(t testing.TB) *Platform {
	p := &Platform{
		now:      time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		settings: map[string]client.DeploySettings{},
		builds:   map[string]*build{},
		sources:  map[string]map[string]string{},
		runtime:  map[string]bool{},
		refusals: map[string]*client.Error{},
	}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.Server.Close)
	return p
}

// SetBuildPlan sets what decides each following build; nil means DefaultPlan.
func (p *Platform) SetBuildPlan(fn func(req client.RedeployRequest) Plan) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buildPlan = fn
}

// SetChat sets what writes the SSE body of each following chat turn (each write is flushed);
// nil means an echo of the message: init, one text_delta "echo: <message>", done.
func (p *Platform) SetChat(fn func(req client.ChatRequest, write func(chunk string))) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.chat = fn
}

// URL returns the platform URL.
func (p *Platform) URL() string { return p.Server.URL }

// AddAgent registers an agent with its deploy settings and returns it (its id is "ag_" + slug).
func (p *Platform) AddAgent(slug string, s client.DeploySettings) client.Agent {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, port, _ := net.SplitHostPort(p.Server.Listener.Addr().String())
	a := client.Agent{AgentID: "ag_" + slug, Slug: slug, Name: slug, URL: "http://" + slug + "." + AppsDomain + ":" + port}
	p.agents = append(p.agents, a)
	p.settings[a.AgentID] = s
	return a
}

// AddDeployment records a deployment as given (tests set its status, activity and times); an
// empty DeployID gets one. It returns the stored record.
func (p *Platform) AddDeployment(d client.Deployment) client.Deployment {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d.DeployID == "" {
		d.DeployID = p.nextID("d")
	}
	if d.CreatedAt.IsZero() {
		d.CreatedAt = p.tick()
	}
	if d.IsActive {
		p.deactivate(d.AgentID, d.Environment)
	}
	p.deployments = append(p.deployments, &d)
	return d
}

// Deployments returns the agent's deployments, newest first.
func (p *Platform) Deployments(agentID string) []client.Deployment {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.list(agentID, "")
}

// Refuse makes the next request to method and path (for example "POST",
// "/api/deployments/promote") answer e, once.
func (p *Platform) Refuse(method, path string, e *client.Error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusals[method+" "+path] = e
}

// Source returns the files of an uploaded source version.
func (p *Platform) Source(sourceVersionID string) map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sources[sourceVersionID]
}

// RevokeRuntimeTokens makes every runtime token minted so far stop working (as if expired).
func (p *Platform) RevokeRuntimeTokens() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.runtime)
}

// ChatRequests returns the chat requests received, in order.
func (p *Platform) ChatRequests() []client.ChatRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]client.ChatRequest(nil), p.chats...)
}

// Frame renders v as one SSE frame: "data: <json>\n\n".
func Frame(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // test data that cannot be encoded is a bug in the test
	}
	return "data: " + string(b) + "\n\n"
}

// tick advances the fake clock by a second and returns it.
func (p *Platform) tick() time.Time {
	p.now = p.now.Add(time.Second)
	return p.now
}

func (p *Platform) nextID(prefix string) string {
	p.seq++
	return fmt.Sprintf("%s%04d", prefix, p.seq)
}

func (p *Platform) serve(w http.ResponseWriter, r *http.Request) {
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	if label, ok := strings.CutSuffix(host, "."+AppsDomain); ok {
		p.serveRuntime(w, r, label)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+Token {
		writeError(w, &client.Error{Status: 401, Code: client.CodeUnauthenticated, Message: "missing or unknown token"})
		return
	}
	p.mu.Lock()
	refusal := p.refusals[r.Method+" "+r.URL.Path]
	delete(p.refusals, r.Method+" "+r.URL.Path)
	p.mu.Unlock()
	if refusal != nil {
		writeError(w, refusal)
		return
	}
	p.route(w, r)
}

func (p *Platform) route(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	route := r.Method + " " + strings.Join(parts, "/")
	arg := func(i int) string { return parts[i] }
	switch {
	case route == "GET api/agents":
		p.mu.Lock()
		agents := append([]client.Agent(nil), p.agents...)
		p.mu.Unlock()
		writeJSON(w, 200, agents)
	case match(parts, "GET", r.Method, "api", "agents", "*") && len(parts) == 3:
		a, ok := p.agent(arg(2))
		if !ok {
			writeError(w, notFound("agent "+arg(2)))
			return
		}
		writeJSON(w, 200, a)
	case match(parts, "GET", r.Method, "api", "agents", "*", "deploy-settings"):
		p.withAgent(w, arg(2), func(a client.Agent) { writeJSON(w, 200, p.settings[a.AgentID]) })
	case match(parts, "POST", r.Method, "api", "agents", "*", "source-versions"):
		p.withAgent(w, arg(2), func(client.Agent) { p.upload(w, r) })
	case match(parts, "POST", r.Method, "api", "agents", "*", "tokens"):
		p.withAgent(w, arg(2), func(client.Agent) { p.mint(w, r) })
	case match(parts, "GET", r.Method, "api", "agents", "*", "deployments"):
		p.withAgent(w, arg(2), func(a client.Agent) {
			p.mu.Lock()
			defer p.mu.Unlock()
			writeJSON(w, 200, map[string]any{"deployments": p.list(a.AgentID, r.URL.Query().Get("environment"))})
		})
	case match(parts, "GET", r.Method, "api", "agents", "*", "active-deployment"):
		p.withAgent(w, arg(2), func(a client.Agent) {
			p.mu.Lock()
			defer p.mu.Unlock()
			for _, d := range p.list(a.AgentID, r.URL.Query().Get("environment")) {
				if d.IsActive {
					writeJSON(w, 200, d)
					return
				}
			}
			writeError(w, notFound("active deployment"))
		})
	case route == "POST api/deployments/redeploy":
		p.redeploy(w, r)
	case route == "POST api/deployments/promote":
		p.promote(w, r)
	case route == "POST api/deployments/rollback":
		p.rollback(w, r)
	case match(parts, "GET", r.Method, "api", "deployments", "*") && len(parts) == 3:
		p.mu.Lock()
		defer p.mu.Unlock()
		d := p.deployment(arg(2))
		if d == nil {
			writeError(w, notFound("deployment "+arg(2)))
			return
		}
		out := *d
		if b := p.builds[d.BuildID]; b != nil {
			p.run(b)
			if b.pending > 0 {
				b.pending--
				out.Status, out.IsActive, out.ReadyAt, out.ActivatedAt = client.StatusBuilding, false, nil, nil
			}
		}
		writeJSON(w, 200, out)
	case match(parts, "POST", r.Method, "api", "deployments", "*", "activate"):
		p.mu.Lock()
		defer p.mu.Unlock()
		d := p.deployment(arg(2))
		switch {
		case d == nil:
			writeError(w, notFound("deployment "+arg(2)))
		case d.Status != client.StatusReady:
			writeError(w, &client.Error{Status: 422, Code: client.CodeBuildNotReady, Message: "deployment " + d.DeployID + " is " + d.Status})
		default:
			p.activate(d)
			writeJSON(w, 200, d)
		}
	case match(parts, "GET", r.Method, "api", "builds", "*", "status"):
		p.mu.Lock()
		defer p.mu.Unlock()
		b := p.builds[arg(2)]
		if b == nil {
			writeError(w, notFound("build "+arg(2)))
			return
		}
		p.run(b)
		writeJSON(w, 200, b.status)
	case match(parts, "GET", r.Method, "api", "builds", "*", "logs"):
		p.logs(w, r, arg(2))
	default:
		writeError(w, notFound("route "+r.Method+" "+r.URL.Path))
	}
}

// match reports whether parts is the pattern (with "*" for any one segment) and method matches.
func match(parts []string, method, got string, pattern ...string) bool {
	if method != got || len(parts) != len(pattern) {
		return false
	}
	for i, s := range pattern {
		if s != "*" && s != parts[i] {
			return false
		}
	}
	return true
}

func (p *Platform) agent(id string) (client.Agent, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.agents {
		if a.AgentID == id {
			return a, true
		}
	}
	return client.Agent{}, false
}

func (p *Platform) withAgent(w http.ResponseWriter, id string, fn func(client.Agent)) {
	a, ok := p.agent(id)
	if !ok {
		writeError(w, notFound("agent "+id))
		return
	}
	fn(a)
}

func (p *Platform) deployment(id string) *client.Deployment {
	for _, d := range p.deployments {
		if d.DeployID == id {
			return d
		}
	}
	return nil
}

// list returns the agent's deployments of env ("" for all), newest first, as copies.
func (p *Platform) list(agentID, env string) []client.Deployment {
	out := []client.Deployment{}
	for i := len(p.deployments) - 1; i >= 0; i-- {
		d := p.deployments[i]
		if d.AgentID == agentID && (env == "" || d.Environment == env) {
			out = append(out, *d)
		}
	}
	return out
}

func (p *Platform) deactivate(agentID, env string) {
	for _, d := range p.deployments {
		if d.AgentID == agentID && d.Environment == env {
			d.IsActive = false
		}
	}
}

func (p *Platform) activate(d *client.Deployment) {
	p.deactivate(d.AgentID, d.Environment)
	now := p.tick()
	d.IsActive, d.ActivatedAt = true, &now
}

// pinnedURL returns the pinned URL of d: http://<deployId>--<slug>.apps.localhost:<port>.
func (p *Platform) pinnedURL(d *client.Deployment) string {
	_, port, _ := net.SplitHostPort(p.Server.Listener.Addr().String())
	slug := strings.TrimPrefix(d.AgentID, "ag_")
	return "http://" + d.DeployID + "--" + slug + "." + AppsDomain + ":" + port
}

func (p *Platform) upload(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != "application/gzip" {
		writeError(w, &client.Error{Status: 400, Code: client.CodeInvalidRequest, Message: "Content-Type " + ct + ": want application/gzip"})
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, &client.Error{Status: 400, Code: client.CodeInvalidRequest, Message: err.Error()})
		return
	}
	files, err := untar(body)
	if err != nil {
		writeError(w, &client.Error{Status: 400, Code: client.CodeInvalidSource, Message: err.Error()})
		return
	}
	if _, ok := files["svc.json"]; !ok {
		writeError(w, &client.Error{Status: 400, Code: client.CodeInvalidSource, Message: "the source tree is invalid",
			Problems: []client.Problem{{File: "svc.json", Message: "missing"}}})
		return
	}
	sum := sha256.Sum256(body)
	p.mu.Lock()
	id := p.nextID("sv")
	p.sources[id] = files
	p.mu.Unlock()
	writeJSON(w, 201, client.SourceVersion{SourceVersionID: id, Digest: "sha256:" + hex.EncodeToString(sum[:])})
}

// untar reads a tar.gz into a map of path to content (links as "-> target").
func untar(b []byte) (map[string]string, error) {
	zr, err := gzip.NewReader(strings.NewReader(string(b)))
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	files := map[string]string{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		switch hdr.Typeflag {
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				return nil, err
			}
			files[hdr.Name] = string(data)
		case tar.TypeSymlink:
			files[hdr.Name] = "-> " + hdr.Linkname
		default:
			return nil, fmt.Errorf("%s: unexpected entry type %q", hdr.Name, hdr.Typeflag)
		}
	}
}

func notFound(what string) *client.Error {
	return &client.Error{Status: 404, Code: client.CodeNotFound, Message: what + " not found"}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // a client that left is no concern of the fake
}

func writeError(w http.ResponseWriter, e *client.Error) {
	body := map[string]any{"error": map[string]any{"code": e.Code, "message": e.Message}}
	if len(e.Problems) > 0 {
		body["problems"] = e.Problems
	}
	writeJSON(w, e.Status, body)
}
