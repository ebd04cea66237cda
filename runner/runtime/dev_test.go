package runtime_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"svc/agent"
	"svc/agent/agenttest"
	"svc/runner/runtime"
)

func TestServeDev(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- runtime.ServeDev(ctx, runtime.DevOptions{Dir: agenttest.Dir(t, "hello"), Addr: "127.0.0.1:0", AuthToken: "tok", Logger: quietLogger(),
			Ready: func(url string) { urls <- url }})
	}()
	var url string
	select {
	case url = <-urls:
	case err := <-errc:
		t.Fatalf("ServeDev: %v", err)
	}
	req, _ := http.NewRequest("POST", url+"/chat/sync", strings.NewReader(`{"message":"hi"}`))
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"text":"echo: hi"`) {
		t.Errorf("chat: %d %s", resp.StatusCode, body)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("ServeDev after cancel: %v", err)
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestServeDevInvalidTree(t *testing.T) {
	err := runtime.ServeDev(context.Background(), runtime.DevOptions{Dir: agenttest.Dir(t, "broken"), Addr: "127.0.0.1:0", Logger: quietLogger()})
	var problems agent.Problems
	if !errors.As(err, &problems) || len(problems) < 3 {
		t.Fatalf("err = %v, want the tree's problems", err)
	}
}
