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
