package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// quickstart reads the README's quickstart block: the lines of the ```sh block under the
// "## Quickstart" heading.
func quickstart(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	section, block := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			section = line == "## Quickstart"
		case section && strings.HasPrefix(line, "```sh"):
			block = true
		case section && block && strings.HasPrefix(line, "```"):
			return lines
		case section && block && strings.TrimSpace(line) != "":
			lines = append(lines, line)
		}
	}
	t.Fatal("README.md has no ```sh block under ## Quickstart")
	return nil
}

// words splits a command line like a shell does for the simple quoting the README uses.
func words(line string) []string {
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	var out []string
	var cur strings.Builder
	quoted, any := false, false
	for _, r := range strings.TrimSpace(line) {
		switch {
		case r == '"':
			quoted, any = !quoted, true
		case r == ' ' && !quoted:
			if any {
				out = append(out, cur.String())
				cur.Reset()
				any = false
			}
		default:
			cur.WriteRune(r)
			any = true
		}
	}
	if any {
		out = append(out, cur.String())
	}
	return out
}

// execute runs svc with args in this process and returns what it printed.
func execute(ctx context.Context, args ...string) (string, error) {
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(""))
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// TestQuickstart runs the README's quickstart as written, on the embedded defaults: svc up,
// then each client command, ending in a chat answered by the deployed agent.
func TestQuickstart(t *testing.T) {
	lines := quickstart(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dataDir := t.TempDir()
	// The settings a reader has by default, moved to this test's folder and port.
	t.Setenv("SVC_DATA_DIR", dataDir)
	t.Setenv("SVC_ADDR", addr)
	t.Setenv("SVC_URL", "http://"+addr)
	t.Setenv("SVC_LOG_FORMAT", "json")
	for _, name := range []string{"SVC_TOKEN", "SVC_AGENT", "DATABASE_URL", "REDIS_URL", "SVC_S3_ENDPOINT", "SVC_BOOTSTRAP_ADMIN_TOKEN"} {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
	// Commands run from the repository root, as the README says.
	wd, _ := os.Getwd()
	if err := os.Chdir(filepath.Join("..", "..")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chdir(wd) })

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	var last string
	for _, line := range lines {
		w := words(line)
		switch {
		case len(w) >= 3 && w[0] == "go" && w[1] == "run" && w[2] == "./cmd/svc":
			args := w[3:]
			if len(args) > 0 && args[0] == "up" {
				wg.Go(func() {
					if out, err := execute(ctx, args...); err != nil {
						t.Errorf("svc up: %v\n%s", err, out)
					}
				})
				waitHealthy(t, "http://"+addr+"/health")
				continue
			}
			out, err := execute(ctx, args...)
			if err != nil {
				t.Fatalf("%s: %v\n%s", line, err, out)
			}
			t.Logf("$ %s\n%s", line, out)
			last = out
		case strings.HasPrefix(line, "export SVC_TOKEN=$(cat .svc/admin-token)"):
			b, err := os.ReadFile(filepath.Join(dataDir, "admin-token"))
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			t.Setenv("SVC_TOKEN", strings.TrimSpace(string(b)))
		default:
			t.Fatalf("the quickstart has a line this test cannot run: %q", line)
		}
	}
	if !strings.Contains(last, "echo: Hello there") {
		t.Fatalf("the quickstart's chat answered %q, want the echo model's answer", last)
	}
}

func waitHealthy(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal(fmt.Sprintf("%s never became healthy", url))
}
