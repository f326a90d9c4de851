package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"paysvc/actors/values/money"
)

// Kinds of imbalance the ledger audit reports (AuditReport.Imbalances).
const (
	// ImbalanceCurrencySum: a currency's entries do not sum to zero.
	ImbalanceCurrencySum = "currency_sum"
	// ImbalanceSnapshot: a wallet's current_balance is not the sum of its entries,
	// its available balance is negative, or entries name a wallet that does not exist.
	ImbalanceSnapshot = "snapshot"
	// ImbalanceOrphanedHold: a wallet has funds set aside (current above available)
	// while its merchant has nothing open that will ever spend or release them.
	ImbalanceOrphanedHold = "orphaned_hold"
)

// ImbalanceKinds are the kinds AuditReport.Imbalances always carries (0 when sound).
var ImbalanceKinds = []string{ImbalanceCurrencySum, ImbalanceSnapshot, ImbalanceOrphanedHold}

// AuditReport is the result of one AuditLedger run.
type AuditReport struct {
	OK   bool `json:"ok"`
	Full bool `json:"full"` // the run recounted every entry
	// ThroughEntryID is the checkpoint after the run: every entry up to it is summed.
	ThroughEntryID int64 `json:"through_entry_id"`
	// Read is how many entries this run read (after the previous checkpoint).
	Read int64 `json:"read"`
	// Entries is how many entries the checkpoint covers in all.
	Entries      int64                   `json:"entries"`
	CurrencySums map[string]money.Amount `json:"currency_sums"`
	// Imbalances counts the findings of each kind (ImbalanceKinds).
	Imbalances map[string]int `json:"imbalances"`
	// Currencies, Wallets and Holds name the findings (at most auditListLimit each).
	Currencies []string `json:"currencies"`
	Wallets    []string `json:"wallets"`
	Holds      []string `json:"holds"`
}

// auditListLimit bounds the ids a report names: the counts are exact, the names
// are where to start looking.
const auditListLimit = 20

// ErrAuditBusy: the audit could not take its consistent cut of the ledger within
// the lock timeout (engines committing a long batch); the next run tries again.
var ErrAuditBusy = errors.New("ledger audit: engines' commits held the ledger past the lock timeout")

// AuditLedger checks the ledger as CheckLedger does, reading only the entries
// after its checkpoint (ledger_audit_checkpoint) unless full or there is none, and
// moves the checkpoint on. Run it from one process at a time (the caller holds
// AuditLock): it owns the checkpoint tables.
//
// The checkpoint must never pass an entry that is not committed yet: entry ids come
// from a sequence, so a batch still committing may hold an id below one already
// visible, and an audit that moved past it would never read it. The watermark is
// therefore taken under a SHARE lock of ledger_entries, which waits for the
// transactions that are inserting entries to end and holds new inserts back for
// the one index read of max(entry_id): every id up to it is then committed or
// never will be (an insert takes its table lock before it draws its id). That
// stall is the audit's cost to the engines: at most one batch commit per run.
//
// The check itself runs in one REPEATABLE READ snapshot taken after the watermark,
// so wallets and entries are seen at one point: each committed batch whole. It
// counts every entry the snapshot shows after the checkpoint, including those past
// the watermark, but only moves the checkpoint to the watermark.
func AuditLedger(ctx context.Context, db *sqlx.DB, full bool, lockTimeout time.Duration) (AuditReport, error) {
	r := AuditReport{CurrencySums: map[string]money.Amount{}, Imbalances: map[string]int{},
		Currencies: []string{}, Wallets: []string{}, Holds: []string{}}
	for _, k := range ImbalanceKinds {
		r.Imbalances[k] = 0
	}
	mark, err := auditWatermark(ctx, db, lockTimeout)
	if err != nil {
		return r, err
	}
	tx, err := db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		return r, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op

	var from int64
	err = tx.GetContext(ctx, &from, `SELECT through_entry_id FROM ledger_audit_checkpoint`)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		full = true
	case err != nil:
		return r, fmt.Errorf("ledger audit checkpoint: %w", err)
	case from > mark:
		// Entries were deleted (a restore to an earlier point): the sums are of
		// entries that are gone.
		full = true
	}
	if full {
		from = 0
		if _, err := tx.ExecContext(ctx, `DELETE FROM ledger_audit_currencies; DELETE FROM ledger_audit_wallets`); err != nil {
			return r, err
		}
	}
	r.Full = full

	// The entries after the checkpoint, split at the watermark: those up to it join
	// the checkpoint; those after it count in this run's check only.
	if _, err := tx.ExecContext(ctx, `CREATE TEMP TABLE ledger_audit_new ON COMMIT DROP AS
		SELECT wallet_id, currency, entry_id <= $2 AS settled, sum(amount) AS total, count(*) AS n
		  FROM ledger_entries WHERE entry_id > $1
		 GROUP BY wallet_id, currency, entry_id <= $2`, from, mark); err != nil {
		return r, fmt.Errorf("ledger audit: read entries: %w", err)
	}
	if err := tx.GetContext(ctx, &r.Read, `SELECT coalesce(sum(n), 0) FROM ledger_audit_new`); err != nil {
		return r, err
	}

	if err := auditCurrencySums(ctx, tx, &r); err != nil {
		return r, err
	}

	// Every wallet against its entries: the checkpoint's sums plus the new ones.
	// O(wallets), not O(entries): a snapshot changed outside the engine is found
	// whether or not its wallet has moved since.
	var bad []string
	if err := tx.SelectContext(ctx, &bad, `WITH s AS (
			SELECT wallet_id, sum(total) AS total FROM (
				SELECT wallet_id, total FROM ledger_audit_wallets
				UNION ALL SELECT wallet_id, total FROM ledger_audit_new WHERE wallet_id IS NOT NULL) x
			GROUP BY wallet_id)
		SELECT coalesce(w.wallet_id, s.wallet_id) FROM wallets w FULL JOIN s ON s.wallet_id = w.wallet_id
		 WHERE w.wallet_id IS NULL OR w.current_balance <> coalesce(s.total, 0) OR w.available_balance < 0
		 ORDER BY 1`); err != nil {
		return r, fmt.Errorf("ledger audit: wallet snapshots: %w", err)
	}
	r.Imbalances[ImbalanceSnapshot] = len(bad)
	r.Wallets = head(bad)

	// Funds set aside with nothing open to spend or release them: a payment file
	// not final (its approval holds), a card collection not cleared yet, a refund
	// the rail has not settled. Per merchant, so it never pages on a hold it cannot
	// tie to its cause; it misses a wallet whose merchant has another open item.
	var holds []string
	if err := tx.SelectContext(ctx, &holds, `SELECT w.wallet_id FROM wallets w
		 WHERE w.current_balance > w.available_balance
		   AND NOT EXISTS (SELECT 1 FROM payout_files f WHERE f.merchant_id = w.merchant_id
		                    AND f.status NOT IN ('COMPLETE', 'CANCELLED', 'FAILED'))
		   AND NOT EXISTS (SELECT 1 FROM invoices i WHERE i.merchant_id = w.merchant_id AND i.state = 'COMPLETE'
		                    AND NOT coalesce((i.data ->> 'cleared')::boolean, false))
		   AND NOT EXISTS (SELECT 1 FROM refunds f WHERE f.merchant_id = w.merchant_id
		                    AND f.status IN ('PENDING', 'OVERDUE', 'DISPUTED'))
		 ORDER BY 1`); err != nil {
		return r, fmt.Errorf("ledger audit: holds: %w", err)
	}
	r.Imbalances[ImbalanceOrphanedHold] = len(holds)
	r.Holds = head(holds)

	if err := moveAuditCheckpoint(ctx, tx, mark, full); err != nil {
		return r, err
	}
	if err := tx.GetContext(ctx, &r.Entries, `SELECT coalesce(sum(entries), 0) FROM ledger_audit_currencies`); err != nil {
		return r, err
	}
	if err := tx.Commit(); err != nil {
		return r, err
	}
	r.ThroughEntryID = mark
	r.OK = r.Imbalances[ImbalanceCurrencySum]+r.Imbalances[ImbalanceSnapshot]+r.Imbalances[ImbalanceOrphanedHold] == 0
	return r, nil
}

// moveAuditCheckpoint adds the entries up to the watermark (ledger_audit_new's
// settled rows) to the checkpoint's sums and moves it there.
func moveAuditCheckpoint(ctx context.Context, tx *sqlx.Tx, mark int64, full bool) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_audit_currencies (currency, total, entries)
		SELECT currency, sum(total), sum(n) FROM ledger_audit_new WHERE settled GROUP BY currency
		ON CONFLICT (currency) DO UPDATE SET total = ledger_audit_currencies.total + excluded.total,
			entries = ledger_audit_currencies.entries + excluded.entries`); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_audit_wallets (wallet_id, total)
		SELECT wallet_id, sum(total) FROM ledger_audit_new WHERE settled AND wallet_id IS NOT NULL GROUP BY wallet_id
		ON CONFLICT (wallet_id) DO UPDATE SET total = ledger_audit_wallets.total + excluded.total`); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_audit_checkpoint (through_entry_id, full_at, updated_at)
		VALUES ($1, now(), now())
		ON CONFLICT (id) DO UPDATE SET through_entry_id = excluded.through_entry_id, updated_at = excluded.updated_at,
			full_at = CASE WHEN $2 THEN excluded.full_at ELSE ledger_audit_checkpoint.full_at END`, mark, full); err != nil {
		return err
	}
	return nil
}

// auditCurrencySums sums every currency's entries (checkpoint and new): each
// must be zero, as every movement is double-entry.
func auditCurrencySums(ctx context.Context, tx *sqlx.Tx, r *AuditReport) error {
	var sums []struct {
		Currency string       `db:"currency"`
		Total    money.Amount `db:"total"`
		N        int64        `db:"n"`
	}
	if err := tx.SelectContext(ctx, &sums, `SELECT currency, sum(total) AS total, sum(n)::bigint AS n FROM (
			SELECT currency, total, entries AS n FROM ledger_audit_currencies
			UNION ALL SELECT currency, total, n FROM ledger_audit_new) x
		GROUP BY currency ORDER BY currency`); err != nil {
		return fmt.Errorf("ledger audit: currency sums: %w", err)
	}
	for _, s := range sums {
		r.CurrencySums[s.Currency] = s.Total
		if !s.Total.IsZero() {
			r.Imbalances[ImbalanceCurrencySum]++
			r.Currencies = append(r.Currencies, s.Currency)
		}
	}
	return nil
}

// auditWatermark is the highest entry id below which every entry is committed or
// never will be (AuditLedger).
func auditWatermark(ctx context.Context, db *sqlx.DB, lockTimeout time.Duration) (int64, error) {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`SET LOCAL lock_timeout = %d`, max(lockTimeout.Milliseconds(), 1))); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `LOCK TABLE ledger_entries IN SHARE MODE`); err != nil {
		if isLockTimeout(err) {
			return 0, ErrAuditBusy
		}
		return 0, fmt.Errorf("ledger audit: lock: %w", err)
	}
	var mark int64
	if err := tx.GetContext(ctx, &mark, `SELECT coalesce(max(entry_id), 0) FROM ledger_entries`); err != nil {
		return 0, err
	}
	return mark, tx.Commit()
}

// AuditFullDue reports whether the last full recount is older than every (or
// there is none): the incremental runs never re-read an entry, so a change to one
// already audited is found only by a full run.
func AuditFullDue(ctx context.Context, q sqlx.QueryerContext, every time.Duration) (bool, error) {
	var at time.Time
	err := sqlx.GetContext(ctx, q, &at, `SELECT full_at FROM ledger_audit_checkpoint`)
	if errors.Is(err, sql.ErrNoRows) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return time.Since(at) >= every, nil
}

// AuditLock is the advisory-lock class of the ledger audit; the schema is the
// second key (as the relay's), since each schema has its own ledger.
const AuditLock = 7_316_421

// TryAuditLock takes the ledger audit's session lock on conn if no other session
// holds it; it lasts until UnlockAudit or the connection closes.
func TryAuditLock(ctx context.Context, conn *sqlx.Conn) (bool, error) {
	var got bool
	err := conn.QueryRowxContext(ctx, `SELECT pg_try_advisory_lock($1, hashtext(current_schema()))`, AuditLock).Scan(&got)
	return got, err
}

// UnlockAudit releases TryAuditLock's lock.
func UnlockAudit(ctx context.Context, conn *sqlx.Conn) error {
	_, err := conn.ExecContext(ctx, `SELECT pg_advisory_unlock($1, hashtext(current_schema()))`, AuditLock)
	return err
}

func head(ids []string) []string {
	if len(ids) > auditListLimit {
		return ids[:auditListLimit]
	}
	if ids == nil {
		return []string{}
	}
	return ids
}

// isLockTimeout reports PostgreSQL's lock_not_available (lock_timeout expired).
func isLockTimeout(err error) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && pqErr.Code == "55P03"
}
