package automations

import (
	"errors"
	"testing"
)

func TestOwnerScope(t *testing.T) {
	tests := []struct {
		name, claim, user string
		trusted           bool
		requested         string
		want              string
		wantErr           bool
	}{
		{name: "scope claim", claim: "team-a", user: "u1", want: "team-a"},
		{name: "scope claim, same scope_id", claim: "team-a", requested: "team-a", want: "team-a"},
		{name: "scope claim, another scope_id", claim: "team-a", requested: "team-b", wantErr: true},
		{name: "verified user", user: "u1", want: "u1"},
		{name: "verified user names itself", user: "u1", requested: "u1", want: "u1"},
		{name: "verified user names another", user: "u1", requested: "u2", wantErr: true},
		{name: "trusted: agent-level", trusted: true, want: ""},
		{name: "trusted: named scope", trusted: true, requested: "team-b", want: "team-b"},
		{name: "no owner", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := OwnerScope(tt.claim, tt.user, tt.trusted, tt.requested)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("OwnerScope = %q, %v; want %q, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
	if _, err := OwnerScope("", "", false, ""); !errors.Is(err, ErrNoOwner) {
		t.Errorf("OwnerScope(nothing) = %v, want ErrNoOwner", err)
	}
	var fe *FieldError
	if _, err := OwnerScope("", "u1", false, "u2"); !errors.As(err, &fe) || fe.Field != "scope_id" {
		t.Errorf("OwnerScope(another scope_id) = %v, want a *FieldError naming scope_id", err)
	}
}

func TestDecide(t *testing.T) {
	tests := []struct {
		policy  Overlap
		running bool
		want    Decision
	}{
		{OverlapSkip, false, Fire},
		{OverlapSkip, true, Skip},
		{"", true, Skip},
		{OverlapQueue, false, Fire},
		{OverlapQueue, true, Queue},
		{OverlapAllow, true, Fire},
	}
	for _, tt := range tests {
		if got := Decide(tt.policy, tt.running); got != tt.want {
			t.Errorf("Decide(%q, %v) = %v, want %v", tt.policy, tt.running, got, tt.want)
		}
	}
}
