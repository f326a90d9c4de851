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
	var dnsErr *net.DNSError
	var certInvalid x509.CertificateInvalidError
	var unknownAuthority x509.UnknownAuthorityError
	var hostnameErr x509.HostnameError
	var verifyErr *tls.CertificateVerificationError
	var recordErr tls.RecordHeaderError
	var netErr net.Error
	switch {
	case errors.Is(err, ErrForbiddenAddress):
		return "the endpoint's address is not allowed (loopback, private or otherwise internal)"
	case errors.Is(err, ErrInvalidEndpoint):
		return "the endpoint URL is not valid"
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return "the endpoint's host name was not found (DNS)"
		}
		return "the endpoint's host name could not be resolved (DNS)"
	case errors.As(err, &hostnameErr):
		return "TLS: the certificate is not valid for the endpoint's host name"
	case errors.As(err, &unknownAuthority), errors.As(err, &certInvalid), errors.As(err, &verifyErr):
		return "TLS: the endpoint's certificate could not be verified"
	case errors.As(err, &recordErr), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return "TLS: the endpoint did not speak TLS"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "the connection was reset by the endpoint"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "the endpoint is unreachable"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timed out"
	case errors.Is(err, errReadBody):
		return "the response body could not be read"
	case strings.Contains(err.Error(), "tls:"):
		return "TLS: the handshake failed"
	}
	return "the request failed before an HTTP answer"
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
// when the endpoint answered (err nil), else by the kind of transport error, in
// the order Describe uses.
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
	var dnsErr *net.DNSError
	var certInvalid x509.CertificateInvalidError
	var unknownAuthority x509.UnknownAuthorityError
	var hostnameErr x509.HostnameError
	var verifyErr *tls.CertificateVerificationError
	var recordErr tls.RecordHeaderError
	var netErr net.Error
	switch {
	case errors.Is(err, ErrForbiddenAddress), errors.Is(err, ErrInvalidEndpoint):
		return ReasonForbidden
	case errors.As(err, &dnsErr):
		return ReasonDNS
	case errors.As(err, &hostnameErr), errors.As(err, &unknownAuthority), errors.As(err, &certInvalid), errors.As(err, &verifyErr),
		errors.As(err, &recordErr), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return ReasonTLS
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return ReasonRefused
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return ReasonTimeout
	case strings.Contains(err.Error(), "tls:"):
		return ReasonTLS
	}
	return ReasonOther
}
