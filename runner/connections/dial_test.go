package connections

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestForbiddenAddr(t *testing.T) {
	cases := []struct {
		addr      string
		forbidden bool
	}{
		{"127.0.0.1", false},
		{"::1", false},
		{"10.1.2.3", false},
		{"192.168.1.1", false},
		{"8.8.8.8", false},
		{"0.0.0.0", false}, // Linux dials it as loopback, which is allowed
		{"169.254.169.254", true},
		{"169.254.170.2", true},
		{"169.254.0.1", true},
		{"::ffff:169.254.169.254", true},
		{"64:ff9b::a9fe:a9fe", true}, // NAT64 form of 169.254.169.254
		{"fe80::1", true},
		{"fd00:ec2::254", true},
		{"fd00:ec2::253", false},
		{"100.100.100.200", true},
		{"100.100.100.201", false},
		{"224.0.0.1", true},
	}
	for _, c := range cases {
		a := netip.MustParseAddr(c.addr)
		if got := forbiddenAddr(a, false) != ""; got != c.forbidden {
			t.Errorf("forbiddenAddr(%s) = %v, want %v", c.addr, got, c.forbidden)
		}
		if c.addr != "224.0.0.1" && forbiddenAddr(a, true) != "" {
			t.Errorf("forbiddenAddr(%s, allowMetadata) refused it", c.addr)
		}
	}
	for _, n := range []string{"metadata.google.internal", "METADATA.google.internal.", "metadata", "metadata.goog", "instance-data"} {
		if forbiddenName(n, false) == "" {
			t.Errorf("forbiddenName(%q) allowed it", n)
		}
		if forbiddenName(n, true) != "" {
			t.Errorf("forbiddenName(%q, allowMetadata) refused it", n)
		}
	}
}

// TestDialOnlyTheAllowedHost: the dialer refuses any address but the one the request's context
// allows, before resolving anything.
func TestDialOnlyTheAllowedHost(t *testing.T) {
	d := newDialer(nil, false)
	for _, c := range []struct {
		allowed, addr string
	}{
		{"", "127.0.0.1:80"},
		{"api.example:443", "127.0.0.1:443"},
		{"api.example:443", "api.example:444"},
	} {
		ctx := context.Background()
		if c.allowed != "" {
			ctx = withAllowedHost(ctx, c.allowed)
		}
		_, err := d.DialContext(ctx, "tcp", c.addr)
		if !errors.Is(err, ErrForbiddenAddress) || !strings.Contains(err.Error(), "only the connection's host") {
			t.Errorf("dial %s allowing %q: err = %v", c.addr, c.allowed, err)
		}
	}
	if err := d.control("tcp4", "169.254.169.254:80", nil); !errors.Is(err, ErrForbiddenAddress) {
		t.Errorf("control(169.254.169.254) = %v", err)
	}
	if err := d.control("tcp4", "127.0.0.1:80", nil); err != nil {
		t.Errorf("control(127.0.0.1) = %v", err)
	}
}
