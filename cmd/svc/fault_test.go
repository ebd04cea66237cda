package main

import (
	crand "crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"svc/registry"
)

// Issue 16: the roles of svc as separate processes (harness_test.go), killed at the worst
// moments through the fault points of package faults, then the invariants checked over the API
// and the database (cluster.checkInvariants).
//
// Each test has its own cluster, Postgres database and Redis database (6, 8 and 10 to 15;
// scaleout uses 7, durable 9). They run locally unless -short, and always in CI.
//
// The waits for a build whose worker was killed are generous (3 minutes): asynq takes the task
// back only once its lease expired (30 s, checked every minute), until its lease is shortened
// (issue 16, item 4). The tests print how long it took.

func skipShortLocally(t *testing.T) {
	t.Helper()
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("the fault harness runs six processes; skipped with -short outside CI")
	}
}

// testBuildFault: a worker armed at point dies in the build of a push (the other worker is down
// until then); both workers start again, the build ends ready and active, and the invariants
// hold; a death before the bundle's upload completed leaves the store's bundles as they were:
// a killed upload leaves no object, whole or half. The tree svc api stored for the build is gone
// once the build ends. With blob > 0 the pushed commit adds blob random
// (incompressible) bytes in files, so that the bundle goes up in many pieces.
func testBuildFault(t *testing.T, redisDB int, point string, blob int) {
	skipShortLocally(t)
	t.Parallel()
	c := startCluster(t, redisDB)
	g := c.gitAgent("fault " + point)
	first := g.push("main", g.first)
	c.waitSettled([]string{first}, 3*time.Minute)

	w1, w2 := c.proc("worker1"), c.proc("worker2")
	w2.Kill()
	w1.Restart(point)
	for i := 0; i*blobFile < blob; i++ { // files of at most blobFile bytes, under the 5 MiB a file
		b := make([]byte, min(blobFile, blob-i*blobFile))
		_, _ = crand.Read(b)
		if err := os.WriteFile(filepath.Join(g.dir, fmt.Sprintf("blob%d.bin", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := c.objectKeys(false)
	id := g.push("main", g.commit("main"))
	w1.WaitDied(2 * time.Minute)
	died := time.Now()
	t.Logf("worker1 died at %s in the build of deployment %s", point, id)
	// A death before the upload completed leaves the store as it was. At build.activate the
	// bundle is stored already, whole: checkDigests reads it once the deployment refers to it.
	if after := c.objectKeys(false); point != "build.activate" && !slices.Equal(after, before) {
		t.Errorf("invariant: the store holds %v after the death at %s, %v before it", after, point, before)
	}
	if blob > 5<<20 { // a multipart upload: its first 5 MiB part went up before the death
		if ups := c.incompleteUploads(); len(ups) != 1 {
			t.Errorf("incomplete multipart uploads after the death: %v; want the killed one", ups)
		} else {
			t.Logf("the killed upload is left incomplete on the server, never an object: %s", ups[0])
		}
	}
	w2.Start("") // another worker carries on
	w1.Start("") // and the dead one comes back
	settled := c.checkInvariants([]string{first, id}, g.AgentID+"/"+registry.Production)
	c.waitTreesGone(10 * time.Second)
	t.Logf("the build interrupted at %s ended %s %s after its worker died", point, settled[id].Status, time.Since(died).Round(100*time.Millisecond))
	if d := settled[id]; d.Status != registry.StatusReady || !d.IsActive {
		t.Errorf("deployment %s after the fault = %+v; want ready and active (the newest push of production)", id, d)
	}
	if blob > 0 {
		// The bundle went up in pieces (64 KiB chunks of the upload's signed stream, or 5 MiB
		// parts): the first ones had been sent when the point passed at half of it.
		var d registry.Deployment
		if err := c.db.Where("id = ?", id).Take(&d).Error; err != nil {
			t.Fatal(err)
		}
		info, err := c.objects.Stat(t.Context(), d.BundleKey)
		if err != nil || info.Size < int64(blob) {
			t.Fatalf("the bundle %s: %+v, %v; want one of more than %d bytes", d.BundleKey, info, err, blob)
		}
		t.Logf("the bundle is %d bytes; the first upload was killed with more than %d of them read into it", info.Size, info.Size/2)
	}
}

func TestFaultWorkerDiesInFetch(t *testing.T)    { testBuildFault(t, 11, "build.fetch", 0) }
func TestFaultWorkerDiesInUpload(t *testing.T)   { testBuildFault(t, 12, "build.upload", 0) }
func TestFaultWorkerDiesInActivate(t *testing.T) { testBuildFault(t, 13, "build.activate", 0) }

// TestFaultWorkerDiesMidUpload: the worker dies with half of a 1 MiB bundle sent to S3 (the
// upload streams it in 64 KiB signed chunks, several of them on the wire when the point passes).
// Nothing of it is visible in the store; the other worker builds the same bundle again, ready
// and active, its digest matching its content.
func TestFaultWorkerDiesMidUpload(t *testing.T) {
	testBuildFault(t, 8, "build.upload.body", 1<<20)
}

// TestFaultWorkerDiesMidMultipartUpload: the same with a 12 MiB bundle, which goes up as a
// multipart upload of 5 MiB parts, one part at a time: the worker dies reading the second part,
// the first one stored on the server. The upload stays incomplete, no object; the other worker
// uploads the bundle whole.
func TestFaultWorkerDiesMidMultipartUpload(t *testing.T) {
	testBuildFault(t, 6, "build.upload.body", 12<<20)
}

// blobFile is the largest file testBuildFault adds to make a bundle of blob bytes.
const blobFile = 4 << 20

// incompleteUploads lists the multipart uploads of the cluster's bucket begun and never
// completed or aborted.
func (c *cluster) incompleteUploads() []string {
	c.t.Helper()
	client, err := minio.New(c.s3.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(c.s3.AccessKey, c.s3.SecretKey, ""), Secure: c.s3.UseSSL, Region: c.s3.Region})
	if err != nil {
		c.t.Fatal(err)
	}
	var out []string
	for u := range client.ListIncompleteUploads(c.t.Context(), c.s3.Bucket, "", true) {
		if u.Err != nil {
			c.t.Fatal(u.Err)
		}
		out = append(out, fmt.Sprintf("%s (upload %s, begun %s)", u.Key, u.UploadID, u.Initiated.Format(time.TimeOnly)))
	}
	return out
}

// objectKeys lists the store's bundles (key and size), or with trees the pushed commits' trees
// that svc api stores for their builds (commits/...), which live until their build ends.
func (c *cluster) objectKeys(trees bool) []string {
	c.t.Helper()
	infos, err := c.objects.List(c.t.Context(), "")
	if err != nil {
		c.t.Fatal(err)
	}
	var out []string
	for _, i := range infos {
		if strings.HasPrefix(i.Key, "commits/") == trees {
			out = append(out, fmt.Sprintf("%s (%d bytes)", i.Key, i.Size))
		}
	}
	return out
}

// waitTreesGone waits until no pushed commit's tree is left in the store: each is deleted when
// its build ends (just after its deployment is recorded).
func (c *cluster) waitTreesGone(within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		left := c.objectKeys(true)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.t.Errorf("invariant: the stored trees %v outlive their builds", left)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitServed waits until every live runner serves deployID at the agent's persistent URL.
func (c *cluster) waitServed(g *gitAgent, deployID string) {
	t := c.t
	t.Helper()
	for _, name := range []string{"runner1", "runner2"} {
		p := c.proc(name)
		if !p.Alive() {
			continue
		}
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
			s, out, err := agentDo(t.Context(), "http://"+p.addr, g.flowAgent, "GET", "/health", nil)
			if err == nil && s == 200 && out["deployId"] == deployID {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s does not serve %s: %d %v %v", name, deployID, s, out, err)
			}
		}
	}
}

// ackedTurn is a chat turn whose answer the client received.
type ackedTurn struct{ message, answer string }

// TestFaultRunnerDiesInChatStream: a runner dies in the middle of a turn (after its 5th text
// delta); the chat continues on the other runner with its history intact: every acknowledged
// turn kept, the interrupted one marked interrupted with the text it had stored, and no two
// user messages in a row.
func TestFaultRunnerDiesInChatStream(t *testing.T) {
	skipShortLocally(t)
	t.Parallel()
	c := startCluster(t, 14)
	g := c.gitAgent("fault chat")
	first := g.push("main", g.first)
	c.waitSettled([]string{first}, 3*time.Minute)
	c.waitServed(g, first)

	r1, r2 := c.proc("runner1"), c.proc("runner2")
	var session string
	var acked []ackedTurn
	chat := func(base, msg string) (int, map[string]any, error) {
		body := map[string]any{"message": msg}
		if session != "" {
			body["session_id"] = session
		}
		return agentDo(t.Context(), base, g.flowAgent, "POST", "/chat/sync", body)
	}
	turn := func(base, msg string) {
		t.Helper()
		// A turn the dead runner left running holds the session's lock until its TTL ends: the
		// next turn is refused (409) until then; a generous deadline.
		refused := map[string]int{}
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
			s, out, err := chat(base, msg)
			if err == nil && s == 200 {
				session = fmt.Sprint(out["session_id"])
				acked = append(acked, ackedTurn{msg, fmt.Sprint(out["text"])})
				if len(refused) > 0 {
					t.Logf("turn %q was refused before it ran: %v", msg, refused)
				}
				return
			}
			refused[fmt.Sprintf("%d %v %v", s, out["error"], err)]++
			if time.Now().After(deadline) {
				t.Fatalf("turn %q on %s = %d %v %v", msg, base, s, out, err)
			}
		}
	}
	// Two acknowledged turns, one on each runner (the front's round robin).
	turn("http://"+r1.addr, "hello one")
	turn("http://"+r2.addr, "hello two")

	// runner2 dies at its 5th text delta of the next turn: the client sees the stream cut.
	r2.Restart("chat.stream:5")
	c.waitServed(g, first)
	long := "please tell me a long story about " + strings.Repeat("many words ", 12) + "and more"
	s, out, err := chat("http://"+r2.addr, long)
	if err == nil {
		t.Fatalf("the turn on the armed runner answered %d %v; want its process killed mid-stream", s, out)
	}
	r2.WaitDied(time.Minute)
	killed := time.Now()

	// The chat goes on on runner1, with its history.
	turn("http://"+r1.addr, "hello three")
	t.Logf("the next turn was answered on the other runner %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	r2.Start("")
	var hist struct {
		Status   string
		Messages []struct {
			Role, Content string
			Interrupted   bool
		}
	}
	s, err = c.agentGet(g, "http://"+r2.addr, "/sessions/history/"+session, &hist)
	if err != nil || s != 200 {
		t.Fatalf("history = %d, %v", s, err)
	}
	var users, lines []string
	prevUser := false
	for _, m := range hist.Messages {
		lines = append(lines, fmt.Sprintf("%s%s: %q", m.Role, map[bool]string{true: " (interrupted)"}[m.Interrupted], m.Content))
		if m.Role == "user" {
			if prevUser {
				t.Errorf("invariant: two user messages in a row, the second %q", m.Content)
			}
			users = append(users, m.Content)
		}
		prevUser = m.Role == "user"
	}
	t.Logf("history after the kill:\n%s", strings.Join(lines, "\n"))
	// Every acknowledged turn is there, in order, with its answer.
	i := 0
	for _, a := range acked {
		for i < len(hist.Messages) && !(hist.Messages[i].Role == "user" && hist.Messages[i].Content == a.message) {
			i++
		}
		if i+1 >= len(hist.Messages) || hist.Messages[i+1].Role != "assistant" || hist.Messages[i+1].Content != a.answer {
			t.Errorf("invariant: the acknowledged turn %q (answered %q) is not in the history in order", a.message, a.answer)
			break
		}
		i += 2
	}
	// The interrupted turn: its user message, then what it had stored, marked interrupted.
	found := false
	for j, m := range hist.Messages {
		if m.Role == "user" && m.Content == long {
			found = true
			next := hist.Messages[min(j+1, len(hist.Messages)-1)]
			switch {
			case j+1 >= len(hist.Messages) || next.Role != "assistant" || !next.Interrupted:
				t.Errorf("the interrupted turn's user message is not followed by an assistant message marked interrupted")
			case !strings.HasPrefix("echo: "+long, next.Content):
				t.Errorf("the interrupted answer %q: want the start of what was streamed, %q", next.Content, "echo: "+long)
			default:
				// A turn stores its streamed text first at a delta turn.FirstCheckpoint
				// (200 ms) into it: the echo model's turn died within its first milliseconds,
				// so nothing may be kept (runner/runtime's TestTurnKilledInItsFirstSecondKeepsItsText
				// has a turn that dies later in its first second).
				t.Logf("the interrupted answer kept %d of the %d bytes streamed in the whole turn", len(next.Content), len("echo: "+long))
			}
		}
	}
	if !found {
		t.Errorf("the interrupted turn's user message is not in the history")
	}
	if hist.Status != "idle" {
		t.Errorf("session status %q after the next turn; want idle", hist.Status)
	}
	c.checkInvariants([]string{first}, g.AgentID+"/"+registry.Production)
}

// agentGet reads path on the agent's URL at base with its runtime token into out.
func (c *cluster) agentGet(g *gitAgent, base, path string, out any) (int, error) {
	req, err := http.NewRequestWithContext(c.t.Context(), "GET", base+path, nil)
	if err != nil {
		return 0, err
	}
	req.Host = g.Slug + ".apps.localhost"
	req.Header.Set("Authorization", "Bearer "+g.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(out)
}
