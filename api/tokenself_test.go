package api_test

import (
	"net/http"
	"testing"

	"gorm.io/gorm"

	"svc/auth"
	"svc/migrations/dbtest"
)

// TestTokenSelf: GET /api/tokens/self names the calling token's kind and binding, never its
// value; a request without a valid pk_ token is 401.
func TestTokenSelf(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		h := newHarness(t, db)
		agentID := h.createAgent("Self")
		tok, observer := h.mintToken(auth.Observer, agentID)
		var got map[string]any
		h.call(http.MethodGet, "/api/tokens/self", observer, nil, http.StatusOK, &got)
		want := map[string]any{"id": tok.ID, "name": tok.Name, "kind": "observer", "agentId": agentID}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("self[%s] = %v, want %v (answer %v)", k, got[k], v, got)
			}
		}
		if len(got) != len(want) {
			t.Errorf("self = %v, want exactly the fields %v", got, want)
		}
		h.call(http.MethodGet, "/api/tokens/self", h.admin, nil, http.StatusOK, &got)
		if got["kind"] != "admin" || got["agentId"] != nil {
			t.Errorf("admin self = %v, want kind admin and agentId null", got)
		}
		h.call(http.MethodGet, "/api/tokens/self", "", nil, http.StatusUnauthorized, nil)
	})
}
