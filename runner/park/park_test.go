package park_test

import (
	"bufio"
	"context"
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

	"svc/runner/park"
	"svc/runner/sse"
)

// server serves handler through a park.Listener and records the connections' states.
type server struct {
	*httptest.Server
	pl *park.Listener

	mu     sync.Mutex
	states map[http.ConnState]int
}

func newServer(t *testing.T, handler http.HandlerFunc) *server {
	t.Helper()
	s := &server{states: map[http.ConnState]int{}}
	s.Server = httptest.NewUnstartedServer(handler)
	s.pl = park.NewListener(s.Listener)
	s.Listener = s.pl
	s.Config.ConnContext = s.pl.ConnContext
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		s.mu.Lock()
		s.states[st]++
		s.mu.Unlock()
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *server) count(st http.ConnState) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.states[st]
}

// streamer is a handler that streams n frames through an sse.Writer, one each time a value
// comes on next (closed: all at once), parking after 'after'; gone is closed when its
// client leaves.
type streamer struct {
	after time.Duration
	next  chan struct{}
	n     int
	gone  chan struct{}
	ended chan struct{}
}

func newStreamer(after time.Duration, n int) *streamer {
	return &streamer{after: after, next: make(chan struct{}), n: n, gone: make(chan struct{}), ended: make(chan struct{}, 16)}
}

func (st *streamer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ps := park.Begin(w, r)
	// Not the request's cancellation, which ends when the handler returns (as it does once the
	// stream is parked): the stream learns that its client left from gone.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	sw := sse.NewWriter(w)
	sw.Coalesce()
	_ = sw.Start()
	var once sync.Once
	gone := func() { once.Do(func() { close(st.gone); cancel() }) }
	move := func(to func() (*park.Conn, error)) error {
		return sw.Move(func() (sse.Dest, error) { return to() })
	}
	ps.Run(st.after, move, gone, func() {
		defer func() { st.ended <- struct{}{} }()
		defer cancel()
		defer sw.Detach() //nolint:errcheck
		for i := 1; i <= st.n; i++ {
			select {
			case <-st.next:
			case <-ctx.Done():
				return
			}
			_ = sw.WriteData(fmt.Appendf(nil, "frame %d", i))
		}
		_ = sw.Write(&sse.Frame{Type: sse.TypeDone})
	})
}

// readData reads the data lines of an event stream until n or the end.
func readData(t *testing.T, r *bufio.Reader, n int) []string {
	t.Helper()
	var got []string
	for n <= 0 || len(got) < n {
		line, err := r.ReadString('\n')
		if errors.Is(err, io.EOF) {
			return got
		}
		if err != nil {
			t.Fatalf("read the stream: %v (after %q)", err, got)
		}
		if d, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
			got = append(got, d)
		}
	}
	return got
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// bothWatches runs test with the shared poller (on Linux) and with a goroutine's read per
// connection.
func bothWatches(t *testing.T, test func(*testing.T)) {
	t.Run("poller", test)
	t.Run("read", func(t *testing.T) {
		park.WithoutPoller(t)
		test(t)
	})
}

// A stream parked mid-way goes on to its end on the raw connection, and the connection then
// serves the client's next request (keep-alive), itself parked and given back again.
func TestParkedStreamEndsAndTheConnectionServesOn(t *testing.T) {
	bothWatches(t, testParkedStreamEndsAndTheConnectionServesOn)
}

func testParkedStreamEndsAndTheConnectionServesOn(t *testing.T) {
	st := newStreamer(time.Millisecond, 3)
	s := newServer(t, st.ServeHTTP)
	client := s.Client()
	for round := 1; round <= 2; round++ {
		resp, err := client.Get(s.URL)
		if err != nil {
			t.Fatal(err)
		}
		body := bufio.NewReader(resp.Body)
		st.next <- struct{}{}
		if got := readData(t, body, 1); len(got) != 1 || got[0] != "frame 1" {
			t.Fatalf("round %d: first frame %q", round, got)
		}
		waitFor(t, "the stream to park", func() bool { return s.count(http.StateHijacked) == round })
		st.next <- struct{}{}
		st.next <- struct{}{}
		rest := readData(t, body, 0)
		if len(rest) != 3 || rest[0] != "frame 2" || rest[1] != "frame 3" || !strings.Contains(rest[2], `"type":"done"`) {
			t.Fatalf("round %d: after parking %q", round, rest)
		}
		if resp.TransferEncoding == nil || resp.TransferEncoding[0] != "chunked" {
			t.Errorf("round %d: transfer encoding %v, want chunked", round, resp.TransferEncoding)
		}
		resp.Body.Close()
		<-st.ended
	}
	// One connection throughout: accepted, then given back after each stream (a second
	// connection would make it 4).
	waitFor(t, "the connection to be given back", func() bool { return s.count(http.StateNew) >= 3 })
	time.Sleep(20 * time.Millisecond)
	if n := s.count(http.StateNew); n != 3 {
		t.Errorf("%d new connection states, want 3 (one connection, given back twice)", n)
	}
	if err := s.pl.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown with nothing parked: %v", err)
	}
}

// A stream that ends before it has waited long enough stays with net/http.
func TestQuickStreamIsNotParked(t *testing.T) {
	st := newStreamer(time.Hour, 1)
	close(st.next)
	s := newServer(t, st.ServeHTTP)
	resp, err := s.Client().Get(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got := readData(t, bufio.NewReader(resp.Body), 0); len(got) != 2 {
		t.Fatalf("frames %q", got)
	}
	if n := s.count(http.StateHijacked); n != 0 {
		t.Errorf("%d hijacked, want none", n)
	}
}

// Without a park.Listener (or over HTTP/2, TLS, Connection: close) a stream runs all the same
// and is never parked.
func TestStreamWithoutListenerIsNotParked(t *testing.T) {
	st := newStreamer(0, 2)
	close(st.next)
	srv := httptest.NewServer(st)
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got := readData(t, bufio.NewReader(resp.Body), 0); len(got) != 3 {
		t.Fatalf("frames %q", got)
	}
	s := newServer(t, st.ServeHTTP)
	req, _ := http.NewRequest("GET", s.URL, nil)
	req.Close = true
	resp, err = s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got := readData(t, bufio.NewReader(resp.Body), 0); len(got) != 3 {
		t.Fatalf("frames with Connection: close %q", got)
	}
	if n := s.count(http.StateHijacked); n != 0 {
		t.Errorf("Connection: close: %d hijacked, want none", n)
	}
}

// A client that leaves a parked stream is seen at once (gone), not at the next write.
func TestParkedClientLeaves(t *testing.T) { bothWatches(t, testParkedClientLeaves) }

func testParkedClientLeaves(t *testing.T) {
	st := newStreamer(time.Millisecond, 3)
	s := newServer(t, st.ServeHTTP)
	resp, err := s.Client().Get(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	st.next <- struct{}{}
	readData(t, bufio.NewReader(resp.Body), 1)
	waitFor(t, "the stream to park", func() bool { return s.count(http.StateHijacked) == 1 })
	resp.Body.Close()
	s.Client().CloseIdleConnections()
	select {
	case <-st.gone:
	case <-time.After(5 * time.Second):
		t.Fatal("gone was not called after the client left")
	}
	<-st.ended
}

// Shutdown waits for parked streams; past its context it cuts their connections.
func TestShutdownWaitsForParkedStreams(t *testing.T) {
	bothWatches(t, testShutdownWaitsForParkedStreams)
}

func testShutdownWaitsForParkedStreams(t *testing.T) {
	st := newStreamer(time.Millisecond, 2)
	s := newServer(t, st.ServeHTTP)
	resp, err := s.Client().Get(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body := bufio.NewReader(resp.Body)
	st.next <- struct{}{}
	readData(t, body, 1)
	waitFor(t, "the stream to park", func() bool { return s.count(http.StateHijacked) == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s.pl.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with a stream parked = %v, want the deadline", err)
	}
	select { // the cut connection is the client's leaving
	case <-st.gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the cut stream did not see its client gone")
	}
	<-st.ended
	if err := s.pl.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown after the stream ended: %v", err)
	}
}

// A request the client sent while its stream was parked (pipelined) is served after it.
func TestParkedStreamKeepsAPipelinedRequest(t *testing.T) {
	bothWatches(t, testParkedStreamKeepsAPipelinedRequest)
}

func testParkedStreamKeepsAPipelinedRequest(t *testing.T) {
	st := newStreamer(time.Millisecond, 1)
	s := newServer(t, st.ServeHTTP)
	conn, err := net.Dial("tcp", s.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stream to park", func() bool { return s.count(http.StateHijacked) == 1 })
	fmt.Fprintf(conn, "GET /second HTTP/1.1\r\nHost: x\r\n\r\n") // before the first ends
	time.Sleep(10 * time.Millisecond)                            // the watch reads its first byte
	st.next <- struct{}{}
	if got := readData(t, bufio.NewReader(resp.Body), 0); len(got) != 2 {
		t.Fatalf("first stream %q", got)
	}
	resp, err = http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("the pipelined request: %v", err)
	}
	st.next <- struct{}{}
	if got := readData(t, bufio.NewReader(resp.Body), 0); len(got) != 2 {
		t.Fatalf("second stream %q", got)
	}
	<-st.ended
	<-st.ended
}
