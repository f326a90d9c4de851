package storage

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"paysvc/actors/values/money"
)

// LedgerReport is the result of CheckLedger. OK is true when every currency sums to
// zero, every wallet snapshot equals the sum of its entries, no available balance
// is negative and every wallet's held funds are its open holds.
type LedgerReport struct {
	OK              bool                    `json:"ok"`
	Entries         int64                   `json:"entries"`
	Wallets         int64                   `json:"wallets"`
	CurrencySums    map[string]money.Amount `json:"currency_sums"`
	WalletMismatch  []string                `json:"wallet_mismatches"`
	NegativeWallets []string                `json:"negative_wallets"`
	// HoldMismatches are the wallets whose held funds (current minus available)
	// differ from the sum of their open holds.
	HoldMismatches []HoldMismatch `json:"hold_mismatches"`
}

// HoldMismatch is one wallet whose held funds are not accounted for: Held is
// current_balance - available_balance, Open the sum of the holds that should make
// it up, split by source (Files, Refunds, Uncleared). Held above Open is money set
// aside that nothing will spend or release (the merchant's available balance is
// too low); Held below Open is a hold that will spend or release money the wallet
// does not have set aside.
type HoldMismatch struct {
	WalletID  string       `json:"wallet_id" db:"wallet_id"`
	Held      money.Amount `json:"held" db:"held"`
	Open      money.Amount `json:"open_holds" db:"open_holds"`
	Files     money.Amount `json:"payment_files" db:"files"`
	Refunds   money.Amount `json:"refunds" db:"refunds"`
	Uncleared money.Amount `json:"uncleared_collections" db:"uncleared"`
}

// openHoldsSQL sums, per wallet, everything that keeps funds in the current balance
// out of the available one. These are all the ways a wallet's available balance
// leaves its current one (actors/aggregates/wallet: Hold, an uncleared Collect; Release and
// Disburse take them back), so the sum is exact, not a bound:
//   - a payment file's held (payout.Header.Held): total plus charges of its
//     transactions at approval, less each outcome since, zero once COMPLETE (the
//     file refuses to complete otherwise), so every file is summed, whatever its
//     status;
//   - a refund's amount while it is PENDING, OVERDUE or DISPUTED (held at
//     creation; a COMPLETED one was debited from the hold, a CANCELLED one
//     released);
//   - a COMPLETE collection not cleared yet (card: its net amount counts in
//     current only until invoice.clear releases it).
//
// A new aggregate that holds money (engine.Tx.Hold) must add its holds here, or
// the check reports them as held funds nothing open explains.
//
// The engine commits a command's wallet snapshots and its files, refunds and
// invoices in one batch transaction, so one statement (one snapshot) sees them
// agree; the audit's orphaned_hold (ledgeraudit.go) is a per-merchant heuristic of
// the same sources that needs no sums.
const openHoldsSQL = `
	SELECT wallet_id, sum(files) AS files, sum(refunds) AS refunds, sum(uncleared) AS uncleared FROM (
		SELECT data ->> 'wallet_id' AS wallet_id, (data ->> 'held')::numeric AS files, 0 AS refunds, 0 AS uncleared
		  FROM payout_files WHERE coalesce((data ->> 'held')::numeric, 0) <> 0
		UNION ALL
		SELECT data ->> 'wallet_id', 0, (data ->> 'amount')::numeric, 0
		  FROM refunds WHERE status IN ('PENDING', 'OVERDUE', 'DISPUTED')
		UNION ALL
		SELECT data ->> 'wallet_id', 0, 0, (data ->> 'net_amount')::numeric
		  FROM invoices WHERE state = 'COMPLETE' AND NOT coalesce((data ->> 'cleared')::boolean, false)
	) h GROUP BY wallet_id`

// CheckLedger verifies conservation on a live database: it can run at any time
// because committed batches are always balanced, and each batch commits a
// command's wallets together with the files, refunds and invoices that hold their
// money (openHoldsSQL).
func CheckLedger(ctx context.Context, q sqlx.QueryerContext) (LedgerReport, error) {
	return CheckLedgerProgress(ctx, q, nil)
}

// walletPage is how many wallets one statement compares with their entries: small
// enough that progress is reported every few seconds on a big ledger, large enough
// that the statements are few.
const walletPage = 10_000

// CheckLedgerProgress is CheckLedger, telling progress (when not nil) what it
// checks as it goes, one line a call: an operator watching a check of a big
// ledger sees it move instead of silence.
func CheckLedgerProgress(ctx context.Context, q sqlx.QueryerContext, progress func(string)) (LedgerReport, error) {
	return checkLedger(ctx, q, progress, walletPage)
}

// checkLedger is CheckLedgerProgress comparing page wallets a statement.
func checkLedger(ctx context.Context, q sqlx.QueryerContext, progress func(string), page int) (LedgerReport, error) {
	if progress == nil {
		progress = func(string) {}
	}
	r := LedgerReport{CurrencySums: map[string]money.Amount{}, WalletMismatch: []string{}, NegativeWallets: []string{},
		HoldMismatches: []HoldMismatch{}}
	start := time.Now()
	progress("summing ledger entries by currency ...")
	if err := sumCurrencies(ctx, q, &r); err != nil {
		return r, err
	}
	progress(fmt.Sprintf("currencies summed: %d currencies, %d entries, in %s", len(r.CurrencySums), r.Entries, since(start)))
	if err := compareWallets(ctx, q, &r, progress, page); err != nil {
		return r, err
	}
	// Held funds against open holds, in one statement: one snapshot of wallets and
	// the rows holding their money. A hold naming no wallet that exists is a
	// mismatch too (its wallet's held is then taken as zero).
	held := time.Now()
	progress("comparing held funds with open holds ...")
	err := sqlx.SelectContext(ctx, q, &r.HoldMismatches, `
		WITH h AS (`+openHoldsSQL+`)
		SELECT coalesce(w.wallet_id, h.wallet_id) AS wallet_id,
		       coalesce(w.current_balance - w.available_balance, 0) AS held,
		       coalesce(h.files + h.refunds + h.uncleared, 0) AS open_holds,
		       coalesce(h.files, 0) AS files, coalesce(h.refunds, 0) AS refunds, coalesce(h.uncleared, 0) AS uncleared
		  FROM wallets w FULL JOIN h ON h.wallet_id = w.wallet_id
		 WHERE coalesce(w.current_balance - w.available_balance, 0) <> coalesce(h.files + h.refunds + h.uncleared, 0)
		 ORDER BY 1`)
	if err != nil {
		return r, fmt.Errorf("wallet holds: %w", err)
	}
	progress(fmt.Sprintf("holds compared: %d mismatches, in %s", len(r.HoldMismatches), since(held)))
	if len(r.HoldMismatches) > 0 {
		r.OK = false
	}
	if err := sqlx.GetContext(ctx, q, &r.Wallets, `SELECT count(*) FROM wallets`); err != nil {
		return r, err
	}
	progress(fmt.Sprintf("ledger check done in %s: ok %v", since(start), r.OK))
	return r, nil
}

// sumCurrencies fills r's per-currency sums and entry count, and sets r.OK to
// whether every currency sums to zero.
func sumCurrencies(ctx context.Context, q sqlx.QueryerContext, r *LedgerReport) error {
	rows, err := q.QueryxContext(ctx, `SELECT currency, sum(amount), count(*) FROM ledger_entries GROUP BY currency`)
	if err != nil {
		return fmt.Errorf("ledger sums: %w", err)
	}
	defer rows.Close()
	r.OK = true
	for rows.Next() {
		var cur string
		var sum money.Amount
		var n int64
		if err := rows.Scan(&cur, &sum, &n); err != nil {
			return err
		}
		r.CurrencySums[cur] = sum
		r.Entries += n
		if !sum.IsZero() {
			r.OK = false
		}
	}
	return rows.Err()
}

// compareWallets lists in r the wallets whose snapshot differs from the sum of
// their entries, or whose available balance is negative. It goes a page of
// wallets at a time, in wallet id order; the engine commits a wallet's snapshot
// with its entries, so each wallet's comparison in one statement is exact
// whichever page it falls in.
func compareWallets(ctx context.Context, q sqlx.QueryerContext, r *LedgerReport, progress func(string), pageSize int) error {
	start := time.Now()
	var total int64
	if err := sqlx.GetContext(ctx, q, &total, `SELECT count(*) FROM wallets`); err != nil {
		return fmt.Errorf("wallet count: %w", err)
	}
	progress(fmt.Sprintf("comparing %d wallets with their entries ...", total))
	var compared int64
	var after *string // nil: from the first wallet
	reported := time.Now()
	for {
		var page []struct {
			WalletID string         `db:"wallet_id"`
			Kind     sql.NullString `db:"kind"`
		}
		err := sqlx.SelectContext(ctx, q, &page, `
			WITH w AS (SELECT wallet_id, current_balance, available_balance FROM wallets
			            WHERE $1::text IS NULL OR wallet_id > $1 ORDER BY wallet_id LIMIT $2),
			     s AS (SELECT wallet_id, sum(amount) AS total FROM ledger_entries
			            WHERE wallet_id >= (SELECT min(wallet_id) FROM w) AND wallet_id <= (SELECT max(wallet_id) FROM w)
			            GROUP BY wallet_id)
			SELECT w.wallet_id,
			       CASE WHEN w.available_balance < 0 THEN 'negative'
			            WHEN w.current_balance <> coalesce(s.total, 0) THEN 'mismatch' END AS kind
			  FROM w LEFT JOIN s USING (wallet_id) ORDER BY w.wallet_id`, after, pageSize)
		if err != nil {
			return fmt.Errorf("wallet sums: %w", err)
		}
		for _, b := range page {
			switch b.Kind.String {
			case "negative":
				r.OK = false
				r.NegativeWallets = append(r.NegativeWallets, b.WalletID)
			case "mismatch":
				r.OK = false
				r.WalletMismatch = append(r.WalletMismatch, b.WalletID)
			}
		}
		compared += int64(len(page))
		if len(page) < pageSize {
			break
		}
		after = &page[len(page)-1].WalletID
		if time.Since(reported) >= 2*time.Second {
			progress(fmt.Sprintf("wallets compared: %d of %d, in %s", compared, total, since(start)))
			reported = time.Now()
		}
	}
	progress(fmt.Sprintf("wallets compared: %d of %d, %d mismatches, %d negative, in %s",
		compared, total, len(r.WalletMismatch), len(r.NegativeWallets), since(start)))
	return nil
}

// since is the time elapsed since t, rounded for a person to read.
func since(t time.Time) time.Duration {
	return time.Since(t).Round(time.Millisecond)
}
