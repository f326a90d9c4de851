package outbound

import (
	"fmt"
	"net/netip"
	"strings"
)

// ValidateEndpoint checks raw as a webhook endpoint at configuration time,
// before it is stored. Unless the client allows private targets it requires
// https, refuses a host that is an IP literal in a forbidden range (wrapping
// ErrForbiddenAddress), refuses "localhost" names and numeric hosts that
// resolvers may read as IPv4 shorthand (such as 2130706433 or 0x7f.1). It
// always refuses userinfo (user:password@), missing hosts, unsupported
// schemes and out-of-range ports (wrapping ErrInvalidEndpoint). Any port is
// allowed.
//
// Passing this check does not make a URL safe to dial forever: a name can
// resolve to an internal address later. Post checks the address actually
// dialled on every request.
func (c *Client) ValidateEndpoint(raw string) error {
	u, err := c.checkURL(raw)
	if err != nil {
		return err
	}
	if c.opts.AllowPrivate {
		return nil
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		if isForbidden(ip) {
			return fmt.Errorf("%w: %q: %s is a loopback, private, link-local or otherwise internal address", ErrForbiddenAddress, u.String(), ip.WithZone(""))
		}
		return nil
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return fmt.Errorf("%w: %q: %s always resolves to a loopback address", ErrForbiddenAddress, u.String(), host)
	}
	if numericHost(name) {
		return fmt.Errorf("%w: %q: host %q looks like a numeric IPv4 address; use a DNS name or a dotted-quad address", ErrInvalidEndpoint, u.String(), host)
	}
	return nil
}

// numericHost reports whether the last label of host is made of digits or is
// a 0x hex number: the WHATWG URL rules, and getaddrinfo, read such hosts
// (127.1, 2130706433, 0x7f.0.0.1) as IPv4 addresses, so they are never a
// legitimate DNS name for an endpoint.
func numericHost(host string) bool {
	labels := strings.Split(host, ".")
	last := labels[len(labels)-1]
	if last == "" {
		return false
	}
	if strings.HasPrefix(last, "0x") {
		last = last[2:]
		if last == "" {
			return true
		}
		for _, r := range last {
			if !strings.ContainsRune("0123456789abcdef", r) {
				return false
			}
		}
		return true
	}
	for _, r := range last {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
