package access_test

import (
	"errors"
	"testing"

	"svc/runner/access"
)

func TestScopeFor(t *testing.T) {
	alice := func(m access.Method, scope string) access.Identity {
		return access.Identity{UserID: "alice", Method: m, Scope: scope}
	}
	tests := []struct {
		name      string
		id        access.Identity
		requested string
		want      string
		forbidden bool
	}{
		{"claim overrides the request", alice(access.MethodRuntimeToken, "s1"), "s2", "s1", false},
		{"claim overrides for an end user too", alice(access.MethodBrowserSession, "s1"), "s2", "s1", false},
		{"runtime token without claim: any scope", alice(access.MethodRuntimeToken, ""), "tenant-9", "tenant-9", false},
		{"api key: any scope", access.Identity{Method: access.MethodAPIKey}, "tenant-9", "tenant-9", false},
		{"browser session: agent-level scope", alice(access.MethodBrowserSession, ""), "", "", false},
		{"browser session: own user id", alice(access.MethodBrowserSession, ""), "alice", "alice", false},
		{"browser session: another scope", alice(access.MethodBrowserSession, ""), "bob", "", true},
		{"idp token: own user id", alice(access.MethodOIDCToken, ""), "alice", "alice", false},
		{"idp token: another scope", alice(access.MethodOIDCToken, ""), "tenant-9", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.id.ScopeFor(tt.requested)
			var scopeErr *access.ScopeError
			if tt.forbidden {
				if !errors.Is(err, access.ErrScopeForbidden) || !errors.As(err, &scopeErr) || scopeErr.Requested != tt.requested {
					t.Fatalf("ScopeFor(%q) = %q, %v; want a *ScopeError for %q", tt.requested, got, err, tt.requested)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ScopeFor(%q) = %q, %v; want %q", tt.requested, got, err, tt.want)
			}
		})
	}
}

func TestSees(t *testing.T) {
	tests := []struct {
		name         string
		id           access.Identity
		owner, scope string
		want         bool
	}{
		{"owner sees own", access.Identity{UserID: "alice", Method: access.MethodBrowserSession}, "alice", "", true},
		{"other user hidden", access.Identity{UserID: "alice", Method: access.MethodOIDCToken}, "bob", "", false},
		{"unowned is shared", access.Identity{UserID: "alice", Method: access.MethodBrowserSession}, "", "", true},
		{"api key sees owned", access.Identity{Method: access.MethodAPIKey}, "bob", "s9", true},
		{"auth token sees owned", access.Identity{Method: access.MethodAuthToken}, "bob", "", true},
		{"service runtime token sees owned", access.Identity{Method: access.MethodRuntimeToken}, "bob", "", true},
		{"scope claim: same scope", access.Identity{UserID: "alice", Scope: "s1", Method: access.MethodRuntimeToken}, "alice", "s1", true},
		{"scope claim: other scope", access.Identity{UserID: "alice", Scope: "s1", Method: access.MethodRuntimeToken}, "alice", "s2", false},
		{"scope claim: agent-level scope", access.Identity{Scope: "s1", Method: access.MethodRuntimeToken}, "", "", false},
		{"no claim: scope not compared", access.Identity{UserID: "alice", Method: access.MethodRuntimeToken}, "alice", "s2", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.id.Sees(tt.owner, tt.scope); got != tt.want {
				t.Errorf("Sees(%q, %q) = %v, want %v", tt.owner, tt.scope, got, tt.want)
			}
		})
	}
}

func TestTrustedAndEndUser(t *testing.T) {
	tests := []struct {
		id               access.Identity
		trusted, endUser bool
	}{
		{access.Identity{Method: access.MethodAPIKey}, true, false},
		{access.Identity{Method: access.MethodNone}, true, false},
		{access.Identity{Method: access.MethodAuthToken}, true, false},
		{access.Identity{UserID: "u", Method: access.MethodRuntimeToken}, false, false},
		{access.Identity{UserID: "u", Method: access.MethodBrowserSession}, false, true},
		{access.Identity{UserID: "u", Method: access.MethodOIDCToken}, false, true},
	}
	for _, tt := range tests {
		if got := tt.id.Trusted(); got != tt.trusted {
			t.Errorf("%s Trusted() = %v, want %v", tt.id.Method, got, tt.trusted)
		}
		if got := tt.id.EndUser(); got != tt.endUser {
			t.Errorf("%s EndUser() = %v, want %v", tt.id.Method, got, tt.endUser)
		}
	}
}
