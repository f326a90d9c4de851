package outbound

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Defaults applied by New to zero (or negative) Options fields.
const (
	DefaultConnectTimeout   = 5 * time.Second
	DefaultTimeout          = 15 * time.Second
	DefaultMaxResponseBytes = 64 << 10
)

// userAgent is sent unless the caller's headers set one.
const userAgent = "paysvc-webhooks/1"

// drainBytes is how much of a response body beyond MaxResponseBytes is read
// and thrown away so a slightly-too-long response can still reuse its
// connection. Anything longer just closes the connection.
const drainBytes = 4 << 10

// Options configures a Client. The zero value is the production setting:
// guard on, https only, system roots, default limits.
type Options struct {
	// AllowPrivate turns the address guard off and allows plain http:
	// loopback, private, link-local and other internal targets can be
	// reached. For sandbox and development environments only.
	AllowPrivate bool
	// ConnectTimeout bounds each TCP connect. Default 5s.
	ConnectTimeout time.Duration
	// Timeout bounds the whole request: connect, TLS, sending the body,
	// waiting for headers and reading the (capped) response body.
	// Default 15s.
	Timeout time.Duration
	// MaxResponseBytes is how much of the response body is read and
	// returned; the rest is discarded. Default 64 KiB.
	MaxResponseBytes int64
	// RootCAs, when set, is the set of CAs trusted for https endpoints
	// (it replaces the system roots, exactly as tls.Config.RootCAs does: to
	// trust both, start from x509.SystemCertPool and add to it). Nil means
	// the system roots.
	RootCAs *x509.CertPool
}

// Client posts webhook deliveries. It is safe for concurrent use; build one
// and share it.
type Client struct {
	opts Options
	hc   *http.Client
	tr   *http.Transport
}

// Response is the outcome of a delivery that reached the receiver.
type Response struct {
	// Status is the HTTP status code. Redirects are not followed, so a 3xx
	// is reported as is.
	Status int
	// Body is at most Options.MaxResponseBytes of the response body.
	Body []byte
	// Latency is the time from sending the request to having read Body.
	Latency time.Duration
	// RetryAfter is the parsed Retry-After header (delay in seconds or an
	// HTTP date, converted to a delay from now); zero when absent, invalid
	// or in the past.
	RetryAfter time.Duration
}

// ErrInvalidEndpoint is returned (wrapped) for a URL that can never be a
// webhook endpoint: unparseable, wrong scheme, userinfo, no host, bad port.
var ErrInvalidEndpoint = errors.New("outbound: invalid webhook endpoint")

// errReadBody wraps a failure while reading a response's body (the status line had
// arrived).
var errReadBody = errors.New("outbound: reading response body")

// New builds a Client with its own http.Transport (never the shared
// http.DefaultTransport, whose dialer is unguarded and which honours proxy
// environment variables).
func New(o Options) *Client {
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	tlsHandshake := 10 * time.Second
	if o.Timeout < tlsHandshake {
		tlsHandshake = o.Timeout
	}
	d := newGuardedDialer(o.AllowPrivate, o.ConnectTimeout)
	tr := &http.Transport{
		// No proxy: a proxy would resolve and connect on our behalf and the
		// guard would only ever see the proxy's address.
		Proxy:                 nil,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: o.RootCAs},
		TLSHandshakeTimeout:   tlsHandshake,
		ResponseHeaderTimeout: o.Timeout,
		ExpectContinueTimeout: 0,
		MaxIdleConns:          100,
		// As many as the dispatcher's workers: a busy receiver keeps its kept-alive
		// (and TLS-handshaken) connections instead of a new one per burst.
		MaxIdleConnsPerHost:    16,
		MaxConnsPerHost:        32,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &Client{
		opts: o,
		tr:   tr,
		hc: &http.Client{
			Transport: tr,
			Timeout:   o.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
	}
}

// Timeout is the longest one request may take (Options.Timeout with its default).
func (c *Client) Timeout() time.Duration { return c.opts.Timeout }

// CloseIdleConnections closes the client's idle keep-alive connections.
func (c *Client) CloseIdleConnections() { c.tr.CloseIdleConnections() }

// Post sends body to rawURL as a POST with the given headers (Content-Type
// defaults to application/json, User-Agent to paysvc-webhooks/1; a "Host"
// entry sets the request's Host). It returns the status code, the first
// MaxResponseBytes of the response body, the latency and the parsed
// Retry-After. Redirects are not followed.
//
// A non-nil error means a transport failure (refused URL, forbidden address,
// DNS, connect, TLS, timeout, body read): the delivery did not get a complete
// answer. If the status line had already arrived, the returned Response still
// carries Status and whatever body was read. A forbidden address wraps
// ErrForbiddenAddress; a URL that can never be an endpoint wraps
// ErrInvalidEndpoint.
func (c *Client) Post(ctx context.Context, rawURL string, headers map[string]string, body []byte) (Response, error) {
	u, err := c.checkURL(rawURL)
	if err != nil {
		return Response{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return Response{}, fmt.Errorf("%w: %v", ErrInvalidEndpoint, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	for k, v := range headers {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}

	start := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		return Response{Latency: time.Since(start)}, err
	}
	defer resp.Body.Close()
	out := Response{
		Status:     resp.StatusCode,
		RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()),
	}
	// LimitReader is what stops an endless body: we never ask for more than
	// the cap, and closing the body afterwards drops the connection.
	out.Body, err = io.ReadAll(io.LimitReader(resp.Body, c.opts.MaxResponseBytes))
	out.Latency = time.Since(start)
	if err != nil {
		return out, fmt.Errorf("%w: %w", errReadBody, err)
	}
	_, _ = io.CopyN(io.Discard, resp.Body, drainBytes)
	return out, nil
}

// checkURL holds the checks that apply to every request: scheme, userinfo,
// host, port. Addresses are left to the dialer, which sees what is actually
// dialled.
func (c *Client) checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error repeats the raw URL, which may hold a password: keep
		// only the reason.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%w: not a valid URL: %v", ErrInvalidEndpoint, err)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !c.opts.AllowPrivate {
			return nil, fmt.Errorf("%w: %q: https is required (plain http is only allowed in sandbox)", ErrInvalidEndpoint, redact(u))
		}
	case "":
		return nil, fmt.Errorf("%w: %q: not an absolute URL (want https://host/path)", ErrInvalidEndpoint, redact(u))
	default:
		return nil, fmt.Errorf("%w: %q: scheme %q is not allowed (want https)", ErrInvalidEndpoint, redact(u), u.Scheme)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: %q: credentials in the URL (user:password@) are not allowed", ErrInvalidEndpoint, redact(u))
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return nil, fmt.Errorf("%w: %q: no host", ErrInvalidEndpoint, redact(u))
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%w: %q: port %q out of range", ErrInvalidEndpoint, redact(u), p)
		}
	}
	return u, nil
}

// redact renders u without its userinfo so error messages never echo a
// password.
func redact(u *url.URL) string {
	if u.User == nil {
		return u.String()
	}
	v := *u
	v.User = url.User("REDACTED")
	return v.String()
}

// parseRetryAfter parses a Retry-After value: a non-negative number of
// seconds or an HTTP date (RFC 9110 section 10.2.3). It returns zero for an
// empty, invalid, negative or past value.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if v[0] >= '0' && v[0] <= '9' {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs <= 0 || secs > int64((1<<63-1)/time.Second) {
			return 0
		}
		return time.Duration(secs) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	if d := t.Sub(now); d > 0 {
		return d
	}
	return 0
}
