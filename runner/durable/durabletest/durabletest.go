// Package durabletest holds what the tests of durable runs share across packages.
package durabletest

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"svc/runner/durable"
)

// SessionUpdates reads session_updated frames from a GET /api/events stream until one says that
// run last is cancelled, and returns the session ids of all it read; the stream ending first
// fails t.
func SessionUpdates(t testing.TB, r io.Reader, last string) []string {
	t.Helper()
	sc := bufio.NewScanner(r)
	var ids []string
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var f struct {
			Type      string `json:"type"`
			SessionID string `json:"session_id"`
			Status    string `json:"status"`
		}
		if err := json.Unmarshal([]byte(data), &f); err != nil {
			t.Fatalf("frame %q: %v", data, err)
		}
		if f.Type != "session_updated" {
			continue
		}
		ids = append(ids, f.SessionID)
		if f.SessionID == last && f.Status == durable.Cancelled {
			return ids
		}
	}
	t.Fatalf("the stream ended before %s was cancelled (read %v): %v", last, ids, sc.Err())
	return nil
}
