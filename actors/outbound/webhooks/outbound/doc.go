// Package outbound is the HTTP client the webhook dispatcher uses to POST
// events to merchants' endpoints: every outbound request is SSRF-guarded (the
// dialled IP is checked, redirects are off, timeouts are set; docs/design.md,
// "The command path").
//
// # Why it exists
//
// A webhook endpoint is a URL typed in by a merchant, and the service then
// makes requests to it from inside our network. Without care that is a
// server-side request forgery primitive: an endpoint of
// http://169.254.169.254/latest/meta-data/ reads cloud credentials,
// https://10.0.0.5:5432/ probes internal services, and the delivery log shows
// the attacker the response. Go's default client guards against none of it.
// Checking the URL when it is saved is not enough either:
//
//   - a DNS name can resolve to a public address when it is validated and to
//     127.0.0.1 when it is used (DNS rebinding), or return several addresses
//     of which one is internal;
//   - a public receiver can answer 302 Location: http://169.254.169.254/;
//   - IPv4-mapped (::ffff:10.0.0.1), NAT64 and 6to4 forms, decimal and short
//     IPv4 spellings (2130706433, 127.1) all reach internal addresses under
//     another name;
//   - a hostile receiver can hold the connection open or stream an endless
//     body to tie up dispatcher workers.
//
// # What it does
//
//   - The address check happens where the connection is made. The
//     transport's DialContext resolves the host itself, refuses it if any
//     resolved address is forbidden (see isForbidden), and then dials the
//     checked IP literals, so what was checked is what is connected to. The
//     net.Dialer's Control hook checks the socket address again just before
//     connect(2). Refusals wrap [ErrForbiddenAddress].
//   - Forbidden: loopback, private (RFC 1918, fc00::/7), link-local
//     (169.254/16 including the metadata address, fe80::/10), unspecified and
//     0.0.0.0/8, multicast, CGNAT 100.64/10, 240/4 and broadcast, deprecated
//     site-local and IPv4-compatible IPv6, and the IPv4-mapped, NAT64 and
//     6to4 forms of the forbidden IPv4 ranges.
//   - Redirects are never followed: a 3xx is returned as the status.
//   - The transport is the client's own (never http.DefaultTransport), with
//     no proxy (a proxy would connect on our behalf and the guard would only
//     see the proxy), TLS 1.2+, and bounded connect, TLS handshake, response
//     header and whole-request timeouts, idle pools and header size.
//   - Only the first MaxResponseBytes of a response body are read; the rest
//     is discarded by closing the connection, so an endless body costs at
//     most that much and Options.Timeout bounds a trickling one.
//   - Plain http is refused and only https is sent, unless
//     Options.AllowPrivate is set; URLs with userinfo are always refused and
//     never echoed with their password.
//
// [Client.ValidateEndpoint] is the configuration-time check (used when a
// merchant saves an endpoint, for a clear error message); [Client.Post] is
// the delivery, and re-checks everything that matters on every request.
//
// # Sandbox
//
// Options.AllowPrivate switches the guard off and allows http, so that
// developers can point webhooks at http://localhost:3000. It must never be
// set in production.
package outbound
