package access_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"svc/runner/access"
)

// fakeSource is a SettingsSource in memory that counts its loads.
type fakeSource struct {
	mu    sync.Mutex
	doc   []byte
	loads int
}

func (f *fakeSource) LoadAccessSettings(context.Context, string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loads++
	return f.doc, nil
}

func (f *fakeSource) set(doc string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.doc = []byte(doc)
}

// TestSettingsCacheReadsAgainAfterTTL: none is nil; a change is seen once the TTL passed, not
// before; reads within the TTL cost no load.
func TestSettingsCacheReadsAgainAfterTTL(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	src := &fakeSource{}
	c := access.NewSettingsCache(src, 5*time.Second, func() time.Time { return now })
	if s, err := c.Settings(ctx, "a"); s != nil || err != nil {
		t.Fatalf("Settings with none stored = %v, %v; want nil, nil", s, err)
	}
	src.set(`{"oidc":{"issuer":"https://idp.example","clientId":"c"},"allow":{"domains":["example.com"]}}`)
	if s, _ := c.Settings(ctx, "a"); s != nil {
		t.Errorf("Settings within the TTL = %v, want the cached nil", s)
	}
	now = now.Add(5 * time.Second)
	s, err := c.Settings(ctx, "a")
	if err != nil || s == nil || s.OIDC.ClientID != "c" || s.OIDC.UserClaim != "sub" {
		t.Fatalf("Settings after the TTL = %+v, %v", s, err)
	}
	if _, err := c.Settings(ctx, "a"); err != nil || src.loads != 2 {
		t.Errorf("loads = %d, want 2 (one per TTL)", src.loads)
	}
	src.set(`{"oidc":{}}`)
	now = now.Add(5 * time.Second)
	if _, err := c.Settings(ctx, "a"); err == nil {
		t.Error("a stored document that does not parse gave no error")
	}
}
