package access_test

import (
	"strings"
	"testing"
	"time"

	"svc/runner/access"
)

func TestSessionCookie(t *testing.T) {
	expires := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		secure bool
		want   string
	}{
		{true, "svc_session=v; Path=/; Expires=Tue, 01 Jan 2030 12:00:00 GMT; HttpOnly; Secure; SameSite=Lax"},
		{false, "svc_session=v; Path=/; Expires=Tue, 01 Jan 2030 12:00:00 GMT; HttpOnly; SameSite=Lax"},
	} {
		if got := access.SessionCookie("v", expires, tt.secure).String(); got != tt.want {
			t.Errorf("SessionCookie(secure=%v) = %q, want %q", tt.secure, got, tt.want)
		}
	}
	cleared := access.ClearSessionCookie(true).String()
	for _, part := range []string{"svc_session=;", "Path=/;", "Max-Age=0", "HttpOnly", "Secure", "SameSite=Lax"} {
		if !strings.Contains(cleared, part) {
			t.Errorf("ClearSessionCookie = %q, want %q in it", cleared, part)
		}
	}
	if strings.Contains(cleared+access.SessionCookie("v", expires, true).String(), "Domain") {
		t.Error("the session cookie names a Domain; want it host-only")
	}
	state := access.StateCookie("s", expires, false).String()
	if !strings.Contains(state, "svc_auth_state=s; Path=/auth/callback;") || !strings.Contains(state, "HttpOnly") {
		t.Errorf("StateCookie = %q", state)
	}
}
