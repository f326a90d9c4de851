package outbound

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"syscall"
)

// Describe says what went wrong with a request in words fit for the merchant who
// owns the endpoint: the kind of failure, never the error text itself, which can
// carry what internal names resolve to, dialled addresses or library internals.
// The full error belongs in the dispatcher's log.
func Describe(err error) string {
	if err == nil {
		return ""
	}
	for _, f := range failures {
		if f.is(err) {
			return f.describe
		}
	}
	return "the request failed before an HTTP answer"
}

// failure is one kind of transport failure, as Describe tells the merchant and
// as Reason counts it. One table serves both, in order, so the words and the
// metric never disagree about what an error was.
type failure struct {
	is       func(error) bool
	describe string
	reason   string // "" leaves the error to a later row for Reason
}

var failures = []failure{
	{isErr(ErrForbiddenAddress), "the endpoint's address is not allowed (loopback, private or otherwise internal)", ReasonForbidden},
	{isErr(ErrInvalidEndpoint), "the endpoint URL is not valid", ReasonForbidden},
	{isDNS(true), "the endpoint's host name was not found (DNS)", ReasonDNS},
	{isDNS(false), "the endpoint's host name could not be resolved (DNS)", ReasonDNS},
	{isAs[x509.HostnameError], "TLS: the certificate is not valid for the endpoint's host name", ReasonTLS},
	{func(err error) bool {
		return isAs[x509.UnknownAuthorityError](err) || isAs[x509.CertificateInvalidError](err) || isAs[*tls.CertificateVerificationError](err)
	}, "TLS: the endpoint's certificate could not be verified", ReasonTLS},
	{func(err error) bool {
		return isAs[tls.RecordHeaderError](err) || strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")
	}, "TLS: the endpoint did not speak TLS", ReasonTLS},
	{isErr(syscall.ECONNREFUSED), "connection refused", ReasonRefused},
	{isErr(syscall.ECONNRESET, syscall.EPIPE), "the connection was reset by the endpoint", ReasonRefused},
	{isErr(syscall.EHOSTUNREACH, syscall.ENETUNREACH), "the endpoint is unreachable", ReasonRefused},
	{func(err error) bool {
		var netErr net.Error
		return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout()
	}, "timed out", ReasonTimeout},
	{isErr(errReadBody), "the response body could not be read", ""},
	{func(err error) bool { return strings.Contains(err.Error(), "tls:") }, "TLS: the handshake failed", ReasonTLS},
}

// isErr matches an error that is any of targets (errors.Is).
func isErr(targets ...error) func(error) bool {
	return func(err error) bool {
		for _, t := range targets {
			if errors.Is(err, t) {
				return true
			}
		}
		return false
	}
}

// isAs matches an error that has a T in its chain (errors.As).
func isAs[T error](err error) bool {
	var t T
	return errors.As(err, &t)
}

// isDNS matches a failed name lookup, of a name not found or (notFound false) of
// any other DNS failure.
func isDNS(notFound bool) func(error) bool {
	return func(err error) bool {
		var dnsErr *net.DNSError
		return errors.As(err, &dnsErr) && dnsErr.IsNotFound == notFound
	}
}

// Failure reasons of Reason: a small fixed set, fit for a metric's label.
const (
	ReasonHTTP4xx   = "http_4xx"
	ReasonHTTP5xx   = "http_5xx"
	ReasonHTTPOther = "http_other" // an answer that is neither 200 nor 4xx/5xx (1xx, 2xx but 200, 3xx)
	ReasonTimeout   = "timeout"
	ReasonRefused   = "connection" // refused, reset or unreachable
	ReasonDNS       = "dns"
	ReasonTLS       = "tls"
	ReasonForbidden = "forbidden_address" // the endpoint is internal, or its URL is not valid
	ReasonOther     = "other"
)

// Reasons lists every value Reason returns.
var Reasons = []string{ReasonHTTP4xx, ReasonHTTP5xx, ReasonHTTPOther, ReasonTimeout, ReasonRefused, ReasonDNS, ReasonTLS, ReasonForbidden, ReasonOther}

// Reason classifies a failed request for operators' metrics: by the HTTP status
// when the endpoint answered (err nil), else by the kind of transport error, from
// the table Describe reads.
func Reason(status int, err error) string {
	if err == nil {
		switch {
		case status >= 400 && status < 500:
			return ReasonHTTP4xx
		case status >= 500 && status < 600:
			return ReasonHTTP5xx
		}
		return ReasonHTTPOther
	}
	for _, f := range failures {
		if f.reason != "" && f.is(err) {
			return f.reason
		}
	}
	return ReasonOther
}
