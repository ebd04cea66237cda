package main

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"svc/agent/agenttest"
)

// TestDevAndChatRuntime runs `svc dev` on the greeter example and talks to it with
// `svc chat --runtime`, with and without the right AUTH_TOKEN.
func TestDevAndChatRuntime(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	t.Setenv("AUTH_TOKEN", "dev-secret")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Go(func() {
		if out, err := execute(ctx, "dev", "../../examples/greeter", "--port", port); err != nil {
			t.Errorf("svc dev: %v\n%s", err, out)
		}
	})
	url := "http://127.0.0.1:" + port
	waitHealthy(t, url+"/health")
	out, err := execute(context.Background(), "chat", "--runtime", url, "-m", "hi from the terminal")
	if err != nil || !strings.Contains(out, "echo: hi from the terminal") {
		t.Fatalf("chat --runtime = %v\n%s", err, out)
	}
	t.Setenv("AUTH_TOKEN", "wrong")
	if out, err := execute(context.Background(), "chat", "--runtime", url, "-m", "x"); err == nil || !strings.Contains(err.Error()+out, "401") {
		t.Fatalf("chat with a wrong AUTH_TOKEN = %v\n%s", err, out)
	}
	if out, err := execute(context.Background(), "dev", agenttest.Dir(t, "broken"), "--port", "0"); err == nil || !strings.Contains(err.Error(), "colour") {
		t.Fatalf("svc dev on the broken fixture = %v\n%s", err, out)
	}
}

// TestDevRefusals: svc dev in a folder without svc.json says where it looked and suggests
// svc dev DIR; on a busy port it suggests --port.
func TestDevRefusals(t *testing.T) {
	empty, greeter := t.TempDir(), mustAbs(t, "../../examples/greeter")
	_, err := execute(context.Background(), "dev", empty, "--port", "0")
	if err == nil || !strings.Contains(err.Error(), "no svc.json in "+empty) || !strings.Contains(err.Error(), "svc dev DIR") {
		t.Errorf("svc dev in an empty folder = %v", err)
	}
	t.Chdir(empty)
	if _, err := execute(context.Background(), "dev", "--port", "0"); err == nil || !strings.Contains(err.Error(), "no svc.json in "+empty) {
		t.Errorf("svc dev without DIR in an empty folder = %v, want the absolute path", err)
	}
	t.Chdir(greeter)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	if _, err := execute(context.Background(), "dev", ".", "--port", port); err == nil || !strings.Contains(err.Error(), "--port N") || !strings.Contains(err.Error(), "--port 0") {
		t.Errorf("svc dev on a busy port = %v, want a --port suggestion", err)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}
