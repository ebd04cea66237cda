package registry_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/migrations/dbtest"
	"svc/registry"
)

// mustCreateAgent makes an agent called name with a derived slug.
func mustCreateAgent(t *testing.T, db *gorm.DB, name string) registry.Agent {
	t.Helper()
	a, err := registry.NewAgents(db).Create(context.Background(), name, "")
	if err != nil {
		t.Fatalf("create agent %q: %v", name, err)
	}
	return a
}

func TestDeriveSlug(t *testing.T) {
	long := strings.Repeat("abcdefghij", 5)
	tests := []struct{ name, want string }{
		{"Support Desk", "support-desk"},
		{"  --Hello,   World!!  ", "hello-world"},
		{"Café Bot 2", "caf-bot-2"},
		{"日本語", "agent"},
		{"", "agent"},
		{long, long[:40]},
		{strings.Repeat("a", 39) + " b", strings.Repeat("a", 39)},
		{"Administratorbots", "administratorbots-agent"}, // "a" and 16 of [a-z2-7]: an agent id's shape
		{"Administratorbot1", "administratorbot1"},       // 1 is not in an id's alphabet
	}
	for _, tt := range tests {
		got := registry.DeriveSlug(tt.name)
		if got != tt.want {
			t.Errorf("DeriveSlug(%q) = %q, want %q", tt.name, got, tt.want)
		}
		if err := registry.ValidateSlug(got); err != nil {
			t.Errorf("DeriveSlug(%q) = %q, which is invalid: %v", tt.name, got, err)
		}
	}
}

func TestValidateSlug(t *testing.T) {
	tests := []struct {
		slug string
		ok   bool
	}{
		{"a", true},
		{"hello-world-2", true},
		{strings.Repeat("a", 40), true},
		{strings.Repeat("a", 41), false},
		{"", false},
		{"Hello", false},
		{"-a", false},
		{"a-", false},
		{"a--b", false},
		{"a_b", false},
		{"a.b", false},
		{"abcdefghijklmnop2", false}, // the shape of an agent id
		{"abcdefghijklmnop1", true},
		{"bbcdefghijklmnop2", true},
		{"abcdefghijklmnop27", true},
	}
	for _, tt := range tests {
		err := registry.ValidateSlug(tt.slug)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateSlug(%q) = %v, want ok=%v", tt.slug, err, tt.ok)
		}
		var ie *registry.InvalidError
		if err != nil && (!errors.As(err, &ie) || ie.Field != "slug" || !errors.Is(err, registry.ErrInvalid)) {
			t.Errorf("ValidateSlug(%q) = %#v, want an *InvalidError for slug", tt.slug, err)
		}
	}
}

func TestAgents(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s := registry.NewAgents(db)

		a, err := s.Create(ctx, "  Support Desk ", "")
		if err != nil {
			t.Fatal(err)
		}
		if a.Slug != "support-desk" || a.Name != "Support Desk" || !strings.HasPrefix(a.ID, "a") {
			t.Errorf("Create = %+v, want slug support-desk, name trimmed, id a...", a)
		}
		// A derived slug that is taken gets a suffix.
		b, err := s.Create(ctx, "Support desk", "")
		if err != nil {
			t.Fatal(err)
		}
		if b.Slug != "support-desk-2" {
			t.Errorf("second derived slug = %q, want support-desk-2", b.Slug)
		}
		// A given slug that is taken is a conflict.
		if _, err := s.Create(ctx, "Other", "support-desk"); !errors.Is(err, registry.ErrConflict) {
			t.Errorf("Create with a taken slug: %v, want ErrConflict", err)
		}
		if _, err := s.Create(ctx, "Other", "Bad Slug"); !errors.Is(err, registry.ErrInvalid) {
			t.Errorf("Create with a bad slug: %v, want ErrInvalid", err)
		}
		if _, err := s.Create(ctx, "   ", ""); !errors.Is(err, registry.ErrInvalid) {
			t.Errorf("Create with no name: %v, want ErrInvalid", err)
		}
		if _, err := s.Create(ctx, strings.Repeat("n", registry.MaxAgentNameLen+1), ""); !errors.Is(err, registry.ErrInvalid) {
			t.Errorf("Create with a long name: %v, want ErrInvalid", err)
		}
		if _, err := s.Create(ctx, strings.Repeat("n", registry.MaxAgentNameLen), ""); err != nil {
			t.Errorf("Create with a name at the limit: %v", err)
		}
		c, err := s.Create(ctx, "Custom", "custom-slug")
		if err != nil || c.Slug != "custom-slug" {
			t.Fatalf("Create with slug = %+v, %v", c, err)
		}

		got, err := s.Get(ctx, a.ID)
		if err != nil || got.Slug != a.Slug || got.Name != a.Name || got.CreatedAt.Sub(a.CreatedAt).Abs() > time.Millisecond {
			t.Errorf("Get = %+v, %v; want %+v", got, err, a)
		}
		got, err = s.GetBySlug(ctx, "custom-slug")
		if err != nil || got.ID != c.ID {
			t.Errorf("GetBySlug = %+v, %v; want %s", got, err, c.ID)
		}
		if _, err := s.Get(ctx, "anone"); !errors.Is(err, registry.ErrAgentNotFound) {
			t.Errorf("Get(missing) = %v, want ErrAgentNotFound", err)
		}
		if _, err := s.GetBySlug(ctx, "none"); !errors.Is(err, registry.ErrAgentNotFound) {
			t.Errorf("GetBySlug(missing) = %v, want ErrAgentNotFound", err)
		}
		list, err := s.List(ctx)
		if err != nil || len(list) != 4 || list[0].ID != a.ID {
			t.Errorf("List = %d agents (first %v), %v; want 4, first %s", len(list), list, err, a.ID)
		}
	})
}

// TestAgentsResolve: an agent is found by its id or its slug; an id wins over a slug equal to
// it (one made before slugs of an id's shape were refused).
func TestAgentsResolve(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s := registry.NewAgents(db)
		a := mustCreateAgent(t, db, "Support Desk")
		b := mustCreateAgent(t, db, "Other")
		for _, ref := range []string{a.ID, "support-desk"} {
			if got, err := s.Resolve(ctx, ref); err != nil || got.ID != a.ID {
				t.Errorf("Resolve(%q) = %+v, %v; want %s", ref, got, err, a.ID)
			}
		}
		for _, ref := range []string{"", "nope", "Support-Desk", "anone"} {
			if _, err := s.Resolve(ctx, ref); !errors.Is(err, registry.ErrAgentNotFound) {
				t.Errorf("Resolve(%q) = %v, want ErrAgentNotFound", ref, err)
			}
		}
		// An old slug equal to another agent's id: the id wins.
		if err := db.Exec("UPDATE agents SET slug = ? WHERE id = ?", b.ID, a.ID).Error; err != nil {
			t.Fatal(err)
		}
		if got, err := s.Resolve(ctx, b.ID); err != nil || got.ID != b.ID {
			t.Errorf("Resolve(id that is also a slug) = %+v, %v; want %s", got, err, b.ID)
		}
	})
}

func TestAgentsDerivedSlugAtLimit(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		s := registry.NewAgents(db)
		name := strings.Repeat("x", 60)
		for i, want := range []string{strings.Repeat("x", 40), strings.Repeat("x", 38) + "-2", strings.Repeat("x", 38) + "-3"} {
			a, err := s.Create(ctx, name, "")
			if err != nil {
				t.Fatal(err)
			}
			if a.Slug != want {
				t.Errorf("agent %d slug = %q, want %q", i, a.Slug, want)
			}
		}
	})
}
