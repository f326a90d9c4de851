package service

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"paysvc/storage"
)

// LedgerAudit schedules the continuous ledger audit (storage.AuditLedger), run by
// one relay instance at a time.
type LedgerAudit struct {
	// Interval between incremental runs; 0 turns the audit off.
	Interval time.Duration
	// FullInterval: a run recounts every entry when the last full one is older
	// (the incremental runs never re-read an audited entry).
	FullInterval time.Duration
}

// auditLockTimeout bounds how long a run waits for the engines' commits in flight
// before taking its watermark (storage.ErrAuditBusy); they hold new commits back
// meanwhile, so it stays short.
const auditLockTimeout = 2 * time.Second

// The audit's metrics exist only on the instance that audits: a standby would
// otherwise show a stale or default finding beside the real one. Vectors without
// labels give a series only once set, and are reset on losing the lock.
var (
	ledgerCheckOK = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "paysvc_ledger_check_ok",
		Help: "1 when the last ledger audit found every currency summing to zero, every wallet snapshot equal to its entries and no orphaned hold; 0 otherwise.",
	}, nil)
	ledgerCheckLastSuccess = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "paysvc_ledger_check_last_success_timestamp_seconds",
		Help: "Unix time the last ledger audit completed (whatever it found: paysvc_ledger_check_ok says that).",
	}, nil)
	ledgerCheckDuration = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "paysvc_ledger_check_duration_seconds",
		Help: "How long the last ledger audit of each mode (incremental, full) took.",
	}, []string{"mode"})
	ledgerImbalances = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "paysvc_ledger_imbalances",
		Help: "Findings of the last ledger audit by kind: currency_sum (currencies not summing to zero), snapshot (wallets whose balance is not their entries' sum), orphaned_hold (funds held with nothing open).",
	}, []string{"kind"})
	ledgerEntriesAudited = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "paysvc_ledger_check_entries_audited_total",
		Help: "Ledger entries read by the audit, by mode (incremental, full).",
	}, []string{"mode"})
	ledgerCheckRuns = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "paysvc_ledger_check_runs_total",
		Help: "Ledger audit runs by mode and result: ok, imbalance, busy (engines' commits held the ledger past the lock timeout), error.",
	}, []string{"mode", "result"})
)

// runLedgerAudit audits the ledger every a.Interval while this process holds the
// audit's advisory lock; without it, it waits as a standby and tries again each
// interval. The first run is at once, so a started instance reports a finding.
func runLedgerAudit(ctx context.Context, db *sqlx.DB, a LedgerAudit, log *slog.Logger) error {
	t := time.NewTicker(a.Interval)
	defer t.Stop()
	for {
		if err := leadLedgerAudit(ctx, db, a, t.C, log); err != nil && ctx.Err() == nil {
			log.Warn("ledger audit", "err", err)
		}
		resetLedgerMetrics()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func resetLedgerMetrics() {
	ledgerCheckOK.Reset()
	ledgerCheckLastSuccess.Reset()
	ledgerCheckDuration.Reset()
	ledgerImbalances.Reset()
}

// leadLedgerAudit takes the audit lock on a connection of its own and audits on
// every tick for as long as it holds it. It returns when the lock is held
// elsewhere, its connection fails, or ctx ends.
func leadLedgerAudit(ctx context.Context, db *sqlx.DB, a LedgerAudit, tick <-chan time.Time, log *slog.Logger) error {
	conn, err := db.Connx(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	got, err := storage.TryAuditLock(ctx, conn)
	if err != nil || !got {
		return err
	}
	defer storage.UnlockAudit(context.Background(), conn) //nolint:errcheck // released with the connection anyway
	log.Info("ledger audit: this instance audits the ledger", "interval", a.Interval, "full_interval", a.FullInterval)
	for {
		auditOnce(ctx, db, a, log)
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
		}
		// The lock lives as long as its connection: a connection lost means
		// another instance may audit now.
		if err := conn.PingContext(ctx); err != nil {
			return err
		}
	}
}

// auditOnce runs one audit and exports what it found.
func auditOnce(ctx context.Context, db *sqlx.DB, a LedgerAudit, log *slog.Logger) {
	full, err := storage.AuditFullDue(ctx, db, a.FullInterval)
	if err != nil {
		ledgerCheckRuns.WithLabelValues("incremental", "error").Inc()
		log.Warn("ledger audit", "err", err)
		return
	}
	mode := "incremental"
	if full {
		mode = "full"
	}
	start := time.Now()
	r, err := storage.AuditLedger(ctx, db, full, auditLockTimeout)
	took := time.Since(start)
	if r.Full {
		mode = "full"
	}
	switch {
	case errors.Is(err, storage.ErrAuditBusy):
		ledgerCheckRuns.WithLabelValues(mode, "busy").Inc()
		log.Info("ledger audit postponed: engines' commits held the ledger", "lock_timeout", auditLockTimeout)
		return
	case err != nil:
		if ctx.Err() == nil {
			ledgerCheckRuns.WithLabelValues(mode, "error").Inc()
			log.Warn("ledger audit", "mode", mode, "err", err)
		}
		return
	}
	ledgerEntriesAudited.WithLabelValues(mode).Add(float64(r.Read))
	ledgerCheckDuration.WithLabelValues(mode).Set(took.Seconds())
	for _, k := range storage.ImbalanceKinds {
		ledgerImbalances.WithLabelValues(k).Set(float64(r.Imbalances[k]))
	}
	ledgerCheckLastSuccess.WithLabelValues().Set(float64(time.Now().UnixNano()) / 1e9)
	if r.OK {
		ledgerCheckOK.WithLabelValues().Set(1)
		ledgerCheckRuns.WithLabelValues(mode, "ok").Inc()
		log.Debug("ledger audit ok", "mode", mode, "read", r.Read, "entries", r.Entries, "took", took)
		return
	}
	ledgerCheckOK.WithLabelValues().Set(0)
	ledgerCheckRuns.WithLabelValues(mode, "imbalance").Inc()
	log.Error("ledger audit found imbalances: a money incident (ops/runbooks.md#ledger-imbalance)", "mode", mode,
		"imbalances", r.Imbalances, "currencies", r.Currencies, "wallets", r.Wallets, "holds", r.Holds,
		"through_entry_id", r.ThroughEntryID)
}
