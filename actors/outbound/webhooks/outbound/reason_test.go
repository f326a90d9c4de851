package outbound_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"syscall"
	"testing"

	"paysvc/actors/outbound/webhooks/outbound"
)

func TestReason(t *testing.T) {
	for _, tc := range []struct {
		status int
		err    error
		want   string
	}{
		{404, nil, outbound.ReasonHTTP4xx},
		{503, nil, outbound.ReasonHTTP5xx},
		{302, nil, outbound.ReasonHTTPOther},
		{201, nil, outbound.ReasonHTTPOther},
		{0, fmt.Errorf("dial: %w", syscall.ECONNREFUSED), outbound.ReasonRefused},
		{0, &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}, outbound.ReasonDNS},
		{0, fmt.Errorf("post: %w", context.DeadlineExceeded), outbound.ReasonTimeout},
		{0, fmt.Errorf("post: %w", outbound.ErrForbiddenAddress), outbound.ReasonForbidden},
		{0, errors.New("remote error: tls: handshake failure"), outbound.ReasonTLS},
		{0, errors.New("something else"), outbound.ReasonOther},
	} {
		got := outbound.Reason(tc.status, tc.err)
		if got != tc.want {
			t.Errorf("Reason(%d, %v) = %s, want %s", tc.status, tc.err, got, tc.want)
		}
		if !slices.Contains(outbound.Reasons, got) {
			t.Errorf("Reason returned %s, which Reasons does not list (its series would not start at 0)", got)
		}
	}
}
