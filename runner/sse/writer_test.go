package sse

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestWriterFramesAndIDs(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	w.Now = func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(&Frame{Type: TypeInit, SessionID: "s"}); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteData([]byte("[DONE]")); err != nil {
		t.Fatal(err)
	}
	if err := w.Comment("ping"); err != nil {
		t.Fatal(err)
	}
	want := "id: 1\ndata: {\"type\":\"init\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"session_id\":\"s\"}\n\n" +
		"id: 2\ndata: [DONE]\n\n: ping\n\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("body = %q, want %q", got, want)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	if !rec.Flushed {
		t.Error("not flushed")
	}
	if w.Seq() != 2 {
		t.Errorf("Seq = %d, want 2", w.Seq())
	}
}

type failingWriter struct{ http.ResponseWriter }

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }
func (failingWriter) Flush()                    {}

func TestWriterStopsAfterFailure(t *testing.T) {
	w := NewWriter(failingWriter{httptest.NewRecorder()})
	err := w.Write(&Frame{Type: TypeWarning, Message: "x"})
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("Write error = %v, want ErrClosed", err)
	}
	if err := w.WriteData([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Write error = %v, want ErrClosed", err)
	}
}

func TestWriterCoalesce(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	w.Now = func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	w.Coalesce()
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if err := w.Write(&Frame{Type: TypeTextDelta, Content: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	frame := "data: {\"type\":\"text_delta\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"content\":\"x\"}\n\n"
	if got := strings.Count(rec.Body.String(), frame); got != 100 {
		t.Errorf("%d frames in body, want 100", got)
	}
	if !strings.HasSuffix(rec.Body.String(), "id: 100\n"+frame) {
		t.Errorf("last frame missing: %q", rec.Body.String()[max(0, rec.Body.Len()-200):])
	}
	if err := w.Write(&Frame{Type: TypeDone}); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
}

func TestWriterExplicitTime(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	if err := w.Write(&Frame{Type: TypeWarning, Message: "m", Time: time.Date(2020, 2, 3, 4, 5, 6, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rec.Body.String(), `"timestamp":"2020-02-03T04:05:06.000Z"`) {
		t.Errorf("body = %q", rec.Body.String())
	}
}

func TestWriterDetachLeavesTheLastFlushToTheServer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		w := NewWriter(rw)
		w.Coalesce()
		if err := w.Start(); err != nil {
			t.Error(err)
		}
		for range 3 {
			if err := w.Write(&Frame{Type: TypeTextDelta, Content: "x"}); err != nil {
				t.Error(err)
			}
		}
		if err := w.Write(&Frame{Type: TypeDone, Reason: "complete"}); err != nil {
			t.Error(err)
		}
		if err := w.Detach(); err != nil {
			t.Error(err)
		}
		if err := w.Write(&Frame{Type: TypeDone}); !errors.Is(err, ErrClosed) {
			t.Errorf("Write after Detach = %v, want ErrClosed", err)
		}
	}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(body), `"type":"text_delta"`); got != 3 || !strings.Contains(string(body), "id: 4\ndata: {\"type\":\"done\"") {
		t.Errorf("body = %q, want 3 deltas and the done frame", body)
	}
}
