package automations

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestVerifyEvent(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	secret := "whsec_test"
	body := []byte(`{"order": 42}`)
	ts := now.Unix()
	good := Sign(secret, ts, body)
	tests := []struct {
		name, sig, ts string
		body          []byte
		want          error
	}{
		{name: "good", sig: good, ts: strconv.FormatInt(ts, 10), body: body},
		{name: "4 minutes old", sig: Sign(secret, ts-240, body), ts: strconv.FormatInt(ts-240, 10), body: body},
		{name: "other secret", sig: Sign("whsec_other", ts, body), ts: strconv.FormatInt(ts, 10), body: body, want: ErrBadSignature},
		{name: "body changed", sig: good, ts: strconv.FormatInt(ts, 10), body: []byte(`{"order": 43}`), want: ErrBadSignature},
		{name: "timestamp changed", sig: good, ts: strconv.FormatInt(ts+1, 10), body: body, want: ErrBadSignature},
		{name: "stale", sig: Sign(secret, ts-301, body), ts: strconv.FormatInt(ts-301, 10), body: body, want: ErrStaleTimestamp},
		{name: "from the future", sig: Sign(secret, ts+301, body), ts: strconv.FormatInt(ts+301, 10), body: body, want: ErrStaleTimestamp},
		{name: "no sha256= prefix", sig: strings.TrimPrefix(good, "sha256="), ts: strconv.FormatInt(ts, 10), body: body, want: ErrMalformed},
		{name: "not hex", sig: "sha256=zz", ts: strconv.FormatInt(ts, 10), body: body, want: ErrMalformed},
		{name: "empty signature", sig: "", ts: strconv.FormatInt(ts, 10), body: body, want: ErrMalformed},
		{name: "timestamp not a number", sig: good, ts: "yesterday", body: body, want: ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := VerifyEvent(secret, tt.sig, tt.ts, tt.body, now)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("VerifyEvent = %v, want %v", err, tt.want)
			}
		})
	}
	var me *MalformedError
	if err := VerifyEvent(secret, good, "x", body, now); !errors.As(err, &me) || me.Header != TimestampHeader {
		t.Errorf("VerifyEvent(bad timestamp) = %v, want a *MalformedError naming %s", err, TimestampHeader)
	}
}

func TestSignFormat(t *testing.T) {
	// HMAC-SHA256("key", "1700000000.{}") computed independently (openssl dgst -sha256 -hmac key).
	got := Sign("key", 1700000000, []byte("{}"))
	want := "sha256=9d713ed406bb7076d4123f0dc2c39d2df5c654ed4b0cd56b52c8b4c940bd63ae"
	if got != want {
		t.Errorf("Sign = %q, want %q", got, want)
	}
}

func TestNewSecret(t *testing.T) {
	a, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if a == b || !strings.HasPrefix(a, "whsec_") || len(a) != len("whsec_")+64 {
		t.Errorf("NewSecret = %q, %q; want two distinct whsec_<64 hex>", a, b)
	}
}
