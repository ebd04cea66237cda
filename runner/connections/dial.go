package connections

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// EnvAllowMetadata is the setting the runtime maps to Options.AllowMetadata: "true" lets
// connections reach link-local and cloud metadata addresses (for an agent that must, on a
// machine where that is safe). Its default is false.
const EnvAllowMetadata = "SVC_ALLOW_METADATA_ADDRESSES"

// ErrForbiddenAddress is wrapped by the errors of requests whose destination is not allowed: a
// cloud metadata or link-local address or name (unless Options.AllowMetadata), or a dial to
// anything but the host and port of the connection's base URL.
var ErrForbiddenAddress = errors.New("connections: destination not allowed")

// Resolver looks up the addresses of a host name; *net.Resolver implements it. Every dial
// resolves the name again and checks every address, so a name that changes its answer between
// two requests (DNS rebinding) is checked on each.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Addresses refused unless Options.AllowMetadata: where clouds serve instance metadata and
// credentials.
var (
	linkLocal4   = netip.MustParsePrefix("169.254.0.0/16") // AWS, GCP, Azure, OpenStack: 169.254.169.254; ECS: 169.254.170.2
	linkLocal6   = netip.MustParsePrefix("fe80::/10")
	nat64        = netip.MustParsePrefix("64:ff9b::/96") // embeds an IPv4 address
	awsMetadata6 = netip.MustParseAddr("fd00:ec2::254")
	alibabaMeta  = netip.MustParseAddr("100.100.100.200")
)

// metadataNames are host names of metadata services, refused whatever they resolve to.
var metadataNames = []string{"metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal"}

// forbiddenAddr returns why a may not be dialled, or "" when it may. Loopback and private
// addresses are allowed: connections to local and internal APIs are what svc dev and private
// deployments are for; the base URL is the agent author's choice, and only the model's part
// of the URL (the path) is untrusted.
func forbiddenAddr(a netip.Addr, allowMetadata bool) string {
	a = a.Unmap()
	if a.Is6() && nat64.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	switch {
	case a.IsMulticast():
		return "a multicast address"
	case allowMetadata:
		return ""
	case linkLocal4.Contains(a) || linkLocal6.Contains(a):
		return "a link-local address, where cloud metadata services answer"
	case a == awsMetadata6 || a == alibabaMeta:
		return "a cloud metadata address"
	}
	return ""
}

// forbiddenName returns why host (a name, not an address) may not be dialled, or "".
func forbiddenName(host string, allowMetadata bool) string {
	if allowMetadata {
		return ""
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	for _, n := range metadataNames {
		if h == n {
			return "the name of a cloud metadata service"
		}
	}
	return ""
}

// checkHost refuses a base URL host (name or address, without port) before any request.
func checkHost(host string, allowMetadata bool) error {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		if why := forbiddenAddr(a, allowMetadata); why != "" {
			return fmt.Errorf("%w: %s is %s (set %s to allow)", ErrForbiddenAddress, host, why, EnvAllowMetadata)
		}
		return nil
	}
	if why := forbiddenName(host, allowMetadata); why != "" {
		return fmt.Errorf("%w: %s is %s (set %s to allow)", ErrForbiddenAddress, host, why, EnvAllowMetadata)
	}
	return nil
}

// dialer dials only checked addresses, and only the host and port the request's context
// allows (allowedHost): the http.Transport of a Client uses it for every connection.
type dialer struct {
	resolver      Resolver
	allowMetadata bool
	net           net.Dialer
}

// allowedHostKey is the context key of the one "host:port" a request may dial.
type allowedHostKey struct{}

func withAllowedHost(ctx context.Context, hostport string) context.Context {
	return context.WithValue(ctx, allowedHostKey{}, hostport)
}

func newDialer(r Resolver, allowMetadata bool) *dialer {
	if r == nil {
		r = net.DefaultResolver
	}
	d := &dialer{resolver: r, allowMetadata: allowMetadata}
	d.net = net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: d.control}
	return d
}

// DialContext resolves addr's host, refuses it when any of its addresses is forbidden, and
// dials the checked addresses in turn (never the name again, so the answer checked is the
// answer used).
func (d *dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	want, _ := ctx.Value(allowedHostKey{}).(string)
	if want == "" {
		return nil, fmt.Errorf("%w: dial %s: the request names no connection host (only the connection's host may be reached)", ErrForbiddenAddress, addr)
	}
	if !strings.EqualFold(want, addr) {
		return nil, fmt.Errorf("%w: dial %s: only the connection's host %s may be reached", ErrForbiddenAddress, addr, want)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	if err := checkHost(host, d.allowMetadata); err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		addrs, err = d.resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", host, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("resolve %s: no addresses", host)
		}
	}
	for _, a := range addrs {
		if why := forbiddenAddr(a, d.allowMetadata); why != "" {
			return nil, fmt.Errorf("%w: %s resolves to %s, %s (set %s to allow)", ErrForbiddenAddress, host, a, why, EnvAllowMetadata)
		}
	}
	var errs []error
	for _, a := range addrs {
		c, err := d.net.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// control checks the address the socket connects to, the last word on where it goes.
func (d *dialer) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: dial %s: %v", ErrForbiddenAddress, address, err)
	}
	if why := forbiddenAddr(ap.Addr(), d.allowMetadata); why != "" {
		return fmt.Errorf("%w: %s is %s", ErrForbiddenAddress, ap.Addr(), why)
	}
	return nil
}
