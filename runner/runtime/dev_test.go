package runtime_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"svc/agent"
	"svc/agent/agenttest"
	"svc/runner/runtime"
)

func TestNewDev(t *testing.T) {
	rt, ag, err := runtime.NewDev(runtime.DevOptions{Dir: agenttest.Dir(t, "hello"), AuthToken: "tok", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := rt.Close(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	srv := httptest.NewServer(rt)
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/chat/sync", strings.NewReader(`{"message":"hi"}`))
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"text":"echo: hi"`) || ag.Config.Name != "hello" {
		t.Errorf("chat: %d %s", resp.StatusCode, body)
	}
}

func TestNewDevInvalidTree(t *testing.T) {
	_, _, err := runtime.NewDev(runtime.DevOptions{Dir: agenttest.Dir(t, "broken"), Logger: quietLogger()})
	var problems agent.Problems
	if !errors.As(err, &problems) || len(problems) < 3 {
		t.Fatalf("err = %v, want the tree's problems", err)
	}
}
