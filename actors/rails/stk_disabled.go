package rails

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"paysvc/storage"
)

var promptsOfDisabled = promauto.NewCounter(prometheus.CounterOpts{
	Name: "paysvc_rails_prompts_disabled_total",
	Help: "Queued M-Pesa prompts of a disabled merchant that the rails role did not send (their invoices fail).",
})

// DescMerchantDisabled is the failure of a prompt whose merchant was disabled
// before it was sent.
const DescMerchantDisabled = "The merchant's account is disabled; no payment request was sent."

// promptAllowed reads the merchant's enabled flag at the moment a prompt is to be
// sent: a prompt queued before `paysvc merchant disable` must not reach the
// customer's phone (docs/security.md, "Kill switches"). The flag is read fresh
// every time (the Scope caches only the environment, fixed at creation), and
// retried while the database does not answer: a prompt is neither sent nor failed
// on a transient error. A merchant that no longer exists is not sent to.
func (s *Scope) promptAllowed(ctx context.Context, merchantID string) bool {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		m, err := storage.GetMerchant(ctx, s.db, merchantID)
		if errors.Is(err, storage.ErrNotFound) {
			return false
		}
		if err == nil {
			return m.Enabled && m.Environment == s.Environment
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(100*time.Millisecond<<min(attempt, 6), 5*time.Second)):
		}
	}
	return false
}
