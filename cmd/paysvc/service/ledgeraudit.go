package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"paysvc/actors/values/every"
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
// audit's advisory lock (the job every.LedgerAudit); without it, it waits as a
// standby and tries again each interval. The first run is at once, so a started
// instance reports a finding.
func runLedgerAudit(ctx context.Context, db *sqlx.DB, a LedgerAudit, log *slog.Logger) error {
	var l auditLead
	defer func() {
		l.release()
		resetLedgerMetrics()
	}()
	return every.Run(ctx, log, every.Job{Name: every.LedgerAudit, Interval: a.Interval, AtStart: true, Run: func(ctx context.Context) error {
		if err := l.hold(ctx, db, a, log); err != nil || l.conn == nil {
			resetLedgerMetrics() // a standby exports no finding
			return err
		}
		return auditOnce(ctx, db, a, log)
	}})
}

func resetLedgerMetrics() {
	ledgerCheckOK.Reset()
	ledgerCheckLastSuccess.Reset()
	ledgerCheckDuration.Reset()
	ledgerImbalances.Reset()
}

// auditLead is the audit lock while this process holds it: taken on a connection
// of its own, and kept for as long as that connection lives.
type auditLead struct{ conn *sqlx.Conn }

// hold takes the lock if it is free, or checks the connection that holds it. It
// leaves l.conn nil when the lock is held elsewhere or was lost (then with the
// error).
func (l *auditLead) hold(ctx context.Context, db *sqlx.DB, a LedgerAudit, log *slog.Logger) error {
	if l.conn != nil {
		// The lock lives as long as its connection: a connection lost means
		// another instance may audit now.
		if err := l.conn.PingContext(ctx); err != nil {
			l.release()
			return err
		}
		return nil
	}
	conn, err := db.Connx(ctx)
	if err != nil {
		return err
	}
	got, err := storage.TryAuditLock(ctx, conn)
	if err != nil || !got {
		conn.Close()
		return err
	}
	l.conn = conn
	log.Info("ledger audit: this instance audits the ledger", "interval", a.Interval, "full_interval", a.FullInterval)
	return nil
}

// release gives the lock back, if held, with its connection.
func (l *auditLead) release() {
	if l.conn == nil {
		return
	}
	storage.UnlockAudit(context.Background(), l.conn) //nolint:errcheck // released with the connection anyway
	l.conn.Close()
	l.conn = nil
}

// auditOnce runs one audit and exports what it found. An audit postponed by the
// engines' commits, or one that found imbalances, is a finding, not an error.
func auditOnce(ctx context.Context, db *sqlx.DB, a LedgerAudit, log *slog.Logger) error {
	full, err := storage.AuditFullDue(ctx, db, a.FullInterval)
	if err != nil {
		ledgerCheckRuns.WithLabelValues("incremental", "error").Inc()
		return fmt.Errorf("ledger audit: %w", err)
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
		return nil
	case err != nil:
		if ctx.Err() == nil {
			ledgerCheckRuns.WithLabelValues(mode, "error").Inc()
		}
		return fmt.Errorf("ledger audit (%s): %w", mode, err)
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
		return nil
	}
	ledgerCheckOK.WithLabelValues().Set(0)
	ledgerCheckRuns.WithLabelValues(mode, "imbalance").Inc()
	log.Error("ledger audit found imbalances: a money incident (ops/runbooks.md#ledger-imbalance)", "mode", mode,
		"imbalances", r.Imbalances, "currencies", r.Currencies, "wallets", r.Wallets, "holds", r.Holds,
		"through_entry_id", r.ThroughEntryID)
	return nil
}
