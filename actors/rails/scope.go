package rails

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"paysvc/storage"
	"paysvc/topics"
)

// Scope is the environment a rails process serves. Sandbox and live processes
// may share one database and one Kafka (docs/security.md, "Live versus
// sandbox"): a sandbox simulator must never answer a live merchant's prompt or
// payout, and a live adapter never a sandbox one. So every rail request is
// checked against its merchant's environment before it is sent, every
// recovery scan reads only this environment's merchants, and every outcome is
// stamped with the environment (and, from a simulator, Simulated), which the
// engine checks again.
//
// A scope also knows the namespace of the deployment's topics and groups on the
// cluster (topics.Namespace): the rails' consumers read their namespace's
// topics in its groups.
type Scope struct {
	Environment string
	Namespace   topics.Namespace
	db          *sqlx.DB
	mu          sync.Mutex
	envs        map[string]string // merchant -> environment: fixed when the merchant is made
}

// NewScope is the scope of a process of environment env in namespace ns.
func NewScope(db *sqlx.DB, env string, ns topics.Namespace) *Scope {
	return &Scope{Environment: env, Namespace: ns, db: db, envs: map[string]string{}}
}

var skipped = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "paysvc_rails_skipped_total",
	Help: "Rail requests a rails process left alone because their merchant is of the other environment (or unknown), by rail.",
}, []string{"rail"})

func init() {
	for _, r := range []string{"mpesa_stk", "card", "pesalink", "payout"} {
		skipped.WithLabelValues(r)
	}
	// The results each rail can give (rails.go, payouts.go), at 0 from the start,
	// so the collections and payouts dashboards read 0 rather than "No data".
	for rail, results := range map[string][]string{"mpesa_stk": {"ok", "refused", "error", "unknown"},
		"card": {"ok", "error"}, "payout": {"ok", "refused", "error"}} {
		for _, r := range results {
			requests.WithLabelValues(rail, r)
		}
	}
}

// Serves reports whether the merchant exists and is of the scope's
// environment. An error is transient (the database), never a yes.
func (s *Scope) Serves(ctx context.Context, merchantID string) (bool, error) {
	s.mu.Lock()
	env, ok := s.envs[merchantID]
	s.mu.Unlock()
	if !ok {
		m, err := storage.GetMerchant(ctx, s.db, merchantID)
		if errors.Is(err, storage.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		env = m.Environment
		s.mu.Lock()
		if len(s.envs) > 100_000 {
			clear(s.envs)
		}
		s.envs[merchantID] = env
		s.mu.Unlock()
	}
	return env == s.Environment, nil
}

// serves is Serves retried until the database answers or ctx ends: a request
// is neither sent nor dropped on a transient error.
func (s *Scope) serves(ctx context.Context, merchantID, rail string) bool {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		ok, err := s.Serves(ctx, merchantID)
		if err == nil {
			if !ok {
				skipped.WithLabelValues(rail).Inc()
			}
			return ok
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(100*time.Millisecond<<min(attempt, 6), 5*time.Second)):
		}
	}
	return false
}

// Group is the consumer group of a rail's requests in this environment. Each
// environment has its own, so both see every request and each takes its own
// merchants' (in one shared group they would split the partitions, and a
// request read by the other environment would be skipped there and lost here).
// The live groups keep their names from before environments had their own: a
// renamed group would start from the topic's beginning and send every old
// prompt again. The name is the cluster's: the scope's namespace prefixes it.
func (s *Scope) Group(base string) string {
	if s.Environment == topics.Live {
		return s.Namespace.Group(base)
	}
	return s.Namespace.Group(base + "-" + s.Environment)
}

// Origin is what the commands of a sink say of their producer.
func (s *Scope) Origin(simulated bool) Origin {
	return Origin{Environment: s.Environment, Simulated: simulated}
}

// Origin is stamped on every command a rail's sink produces: the producing
// process's environment, and whether a simulator made the outcome up.
type Origin struct {
	Environment string
	Simulated   bool
}

func (o Origin) stamp(c *topics.Command) { c.Environment, c.Simulated = o.Environment, o.Simulated }
