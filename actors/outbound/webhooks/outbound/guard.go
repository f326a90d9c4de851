package outbound

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// ErrForbiddenAddress is returned (wrapped) when the address a request would
// be sent to is loopback, private, link-local, multicast, unspecified, CGNAT
// or otherwise not a public unicast address, and the client was not built
// with Options.AllowPrivate. ValidateEndpoint wraps it too when the URL's host
// is such an IP literal.
var ErrForbiddenAddress = errors.New("outbound: forbidden destination address")

// forbiddenV4 are the IPv4 ranges a webhook may never reach. The named
// netip.Addr predicates cover most of them already; the table keeps the list
// explicit and also covers what they do not (0.0.0.0/8, CGNAT, special-purpose and
// documentation ranges, 240/4).
var forbiddenV4 = mustPrefixes(
	"0.0.0.0/8",       // "this network", includes 0.0.0.0 (reaches the local host on Linux)
	"10.0.0.0/8",      // private
	"100.64.0.0/10",   // CGNAT shared address space
	"127.0.0.0/8",     // loopback
	"169.254.0.0/16",  // link-local, includes 169.254.169.254 cloud metadata
	"172.16.0.0/12",   // private
	"192.0.0.0/24",    // IETF protocol assignments (RFC 6890)
	"192.0.2.0/24",    // TEST-NET-1, documentation
	"192.88.99.0/24",  // deprecated 6to4 relay anycast
	"192.168.0.0/16",  // private
	"198.18.0.0/15",   // benchmarking (RFC 2544), used inside some networks
	"198.51.100.0/24", // TEST-NET-2, documentation
	"203.0.113.0/24",  // TEST-NET-3, documentation
	"224.0.0.0/4",     // multicast
	"240.0.0.0/4",     // reserved, includes 255.255.255.255 broadcast
)

// forbiddenV6 are the IPv6 ranges a webhook may never reach. IPv4-mapped
// addresses (::ffff:a.b.c.d) are unmapped and checked as IPv4 before this
// table is consulted.
var forbiddenV6 = mustPrefixes(
	"::/96",           // unspecified ::, loopback ::1, deprecated IPv4-compatible ::a.b.c.d
	"::ffff:0:0:0/96", // IPv4-translated (RFC 2765), not globally routable
	"64:ff9b:1::/48",  // local-use NAT64 (RFC 8215)
	"100::/64",        // discard-only (RFC 6666)
	"2001::/32",       // Teredo: tunnels to an obfuscated IPv4 address
	"2001:db8::/32",   // documentation
	"fc00::/7",        // unique local (private)
	"fec0::/10",       // deprecated site-local, still private in practice
	"fe80::/10",       // link-local
	"ff00::/8",        // multicast
)

var (
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052, IPv4 in the last 32 bits
	sixToFour      = netip.MustParsePrefix("2002::/16")    // RFC 3056, IPv4 in bits 16..47
)

func mustPrefixes(ss ...string) []netip.Prefix {
	ps := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		ps[i] = netip.MustParsePrefix(s)
	}
	return ps
}

// isForbidden reports whether ip must not be dialled by a guarded client.
// The zero (invalid) Addr is forbidden. IPv6 zones are ignored, IPv4-mapped
// IPv6 addresses are judged as the IPv4 address they carry, and so are the
// IPv4 addresses embedded in NAT64 (64:ff9b::/96) and 6to4 (2002::/16)
// addresses, since those are routed to the embedded IPv4 address.
func isForbidden(ip netip.Addr) bool {
	if !ip.IsValid() {
		return true
	}
	ip = ip.WithZone("").Unmap()
	if ip.Is4() {
		return forbiddenV4Addr(ip)
	}
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() ||
		ip.IsMulticast() || ip.IsUnspecified() {
		return true
	}
	for _, p := range forbiddenV6 {
		if p.Contains(ip) {
			return true
		}
	}
	b := ip.As16()
	if nat64WellKnown.Contains(ip) {
		return forbiddenV4Addr(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	}
	if sixToFour.Contains(ip) {
		return forbiddenV4Addr(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
	}
	return false
}

func forbiddenV4Addr(ip netip.Addr) bool {
	for _, p := range forbiddenV4 {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// checkResolved refuses a host if any of its resolved addresses is
// forbidden: a name that resolves to both a public and an internal address is
// treated as hostile rather than "dial the public one".
func checkResolved(host string, addrs []netip.Addr) error {
	if len(addrs) == 0 {
		return fmt.Errorf("outbound: %s: no addresses", host)
	}
	for _, a := range addrs {
		if isForbidden(a) {
			return fmt.Errorf("%w: %s resolves to %s", ErrForbiddenAddress, host, a.WithZone(""))
		}
	}
	return nil
}

// guardedDialer resolves the host itself, checks every resolved address and
// then dials the checked IP literals, so the address that was checked is the
// address that is connected to: a DNS answer that changes between the check
// and the connect (DNS rebinding) cannot slip through. As a second line of
// defence the net.Dialer's Control hook re-checks the socket's remote address
// right before connect(2).
type guardedDialer struct {
	allowPrivate bool
	resolver     *net.Resolver
	dialer       net.Dialer
}

func newGuardedDialer(allowPrivate bool, connectTimeout time.Duration) *guardedDialer {
	g := &guardedDialer{allowPrivate: allowPrivate, resolver: net.DefaultResolver}
	g.dialer = net.Dialer{Timeout: connectTimeout, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		g.dialer.Control = controlCheck
	}
	return g
}

// controlCheck runs on the actual socket address just before connecting.
func controlCheck(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: unparseable dial address %q", ErrForbiddenAddress, address)
	}
	if isForbidden(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrForbiddenAddress, ap.Addr().WithZone(""))
	}
	return nil
}

func (g *guardedDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var ipNet string
	switch network {
	case "tcp":
		ipNet = "ip"
	case "tcp4":
		ipNet = "ip4"
	case "tcp6":
		ipNet = "ip6"
	default:
		return nil, fmt.Errorf("outbound: unsupported network %q", network)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	addrs, err := g.resolver.LookupNetIP(ctx, ipNet, host)
	if err != nil {
		return nil, err
	}
	if !g.allowPrivate {
		if err := checkResolved(host, addrs); err != nil {
			return nil, err
		}
	}
	var firstErr error
	for _, a := range addrs {
		c, err := g.dialer.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, firstErr
}
