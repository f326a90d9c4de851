package service

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"

	"paysvc/actors/aggregates/wallet"
	"paysvc/actors/values/money"
	"paysvc/storage"
)

// dbGauges are the gauges that only the database knows: payment files awaiting
// approval and wallet totals (rails role),
// disabled webhooks and the webhook backlog (dispatcher role). Each is exported
// by the role that already works on those rows, scoped to its environment (a
// sandbox and a live process may share one database); with several instances of
// a role each exports the same value, so dashboards take max, not sum.
//
// They are read on scrape, at most every `every`: scrapes in between (several
// Prometheus servers, a dashboard's refresh) are answered from the last read, so
// the database sees one small read per instance per period whatever scrapes it.
// A read that fails leaves the gauges out of the scrape (a panel shows the gap)
// and counts in paysvc_db_gauges_refresh_failures_total.
type dbGauges struct {
	db              *sqlx.DB
	environment     string
	rails, dispatch bool
	every           time.Duration
	log             *slog.Logger
	failures        prometheus.Counter
	mu              sync.Mutex
	readAt          time.Time
	last            []prometheus.Metric
	now             func() time.Time
	awaiting        *prometheus.Desc
	awaitingOldest  *prometheus.Desc
	wallets         *prometheus.Desc
	disabled        *prometheus.Desc
	backlog         *prometheus.Desc
}

// newDBGauges registers the gauges of the roles cfg runs in reg; nil when it
// runs neither rails nor dispatcher.
func newDBGauges(reg prometheus.Registerer, db *sqlx.DB, cfg Config, log *slog.Logger) *dbGauges {
	g := &dbGauges{db: db, environment: cfg.Environment, rails: cfg.Has(RoleRails), dispatch: cfg.Has(RoleDispatcher),
		every: cfg.DBGaugesEvery, log: log, now: time.Now}
	if !g.rails && !g.dispatch {
		return nil
	}
	env := []string{"environment"}
	g.awaiting = prometheus.NewDesc("paysvc_payout_files_awaiting_approval",
		"Payment files waiting in PREVIEW-AND-APPROVE for their merchant's approval (rails role).", env, nil)
	g.awaitingOldest = prometheus.NewDesc("paysvc_payout_files_awaiting_approval_oldest_seconds",
		"Age of the oldest payment file awaiting approval; 0 when none (rails role).", env, nil)
	g.wallets = prometheus.NewDesc("paysvc_wallets_balance",
		"Sum of the wallets' balances per currency, in major units (KES, not cents), for display only: a float64 of an exact "+
			"sum that the database computed (rails role). balance is current or available.", append(env, "currency", "balance"), nil)
	g.disabled = prometheus.NewDesc("paysvc_webhooks_disabled_endpoints",
		"Webhook endpoints that are not active (disabled at the failure threshold, or by their merchant) (dispatcher role).", env, nil)
	g.backlog = prometheus.NewDesc("paysvc_webhooks_backlog_deliveries",
		"Webhook deliveries PENDING or PROCESSING (retries included), counted up to 100,000 (dispatcher role).", env, nil)
	g.failures = prometheus.NewCounter(prometheus.CounterOpts{Name: "paysvc_db_gauges_refresh_failures_total",
		Help: "Reads of the database gauges that failed; the gauges are left out of scrapes until a read succeeds."})
	reg.MustRegister(g, g.failures)
	return g
}

// Describe is empty: the collector is unchecked, its series depend on the
// roles and on what the database holds.
func (g *dbGauges) Describe(chan<- *prometheus.Desc) {}

// Collect reads the database when the last read is older than every.
func (g *dbGauges) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.last == nil || g.now().Sub(g.readAt) >= g.every {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ms, err := g.read(ctx)
		cancel()
		if err != nil {
			g.failures.Inc()
			g.log.Warn("database gauges: read failed; left out of this scrape", "err", err)
			g.last = nil
			return
		}
		g.last, g.readAt = ms, g.now()
	}
	for _, m := range g.last {
		ch <- m
	}
}

func (g *dbGauges) read(ctx context.Context) ([]prometheus.Metric, error) {
	var ms []prometheus.Metric
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ms = append(ms, prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{g.environment}, labels...)...))
	}
	if g.rails {
		n, age, err := storage.FilesAwaitingApproval(ctx, g.db, g.environment)
		if err != nil {
			return nil, err
		}
		gauge(g.awaiting, float64(n))
		gauge(g.awaitingOldest, age)
		totals, err := storage.WalletTotals(ctx, g.db, g.environment)
		if err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		for _, t := range totals {
			seen[t.Currency] = true
			gauge(g.wallets, majorUnits(t.Current), t.Currency, "current")
			gauge(g.wallets, majorUnits(t.Available), t.Currency, "available")
		}
		for c := range wallet.Currencies { // a currency no wallet holds yet is 0, not absent
			if !seen[c] {
				gauge(g.wallets, 0, c, "current")
				gauge(g.wallets, 0, c, "available")
			}
		}
	}
	if g.dispatch {
		n, err := storage.DisabledWebhooks(ctx, g.db, g.environment)
		if err != nil {
			return nil, err
		}
		gauge(g.disabled, float64(n))
		if n, err = storage.WebhookBacklog(ctx, g.db, g.environment); err != nil {
			return nil, err
		}
		gauge(g.backlog, float64(n))
	}
	return ms, nil
}

// majorUnits is an exact amount as a float64 for display only (a dashboard's
// wallet total); nothing computes with it.
func majorUnits(a money.Amount) float64 {
	f, err := strconv.ParseFloat(a.String(), 64)
	if err != nil {
		return 0
	}
	return f
}
