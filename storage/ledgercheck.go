package storage

import (
	"context"
	"fmt"

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
	r := LedgerReport{CurrencySums: map[string]money.Amount{}, WalletMismatch: []string{}, NegativeWallets: []string{},
		HoldMismatches: []HoldMismatch{}}
	rows, err := q.QueryxContext(ctx, `SELECT currency, sum(amount), count(*) FROM ledger_entries GROUP BY currency`)
	if err != nil {
		return r, fmt.Errorf("ledger sums: %w", err)
	}
	defer rows.Close()
	r.OK = true
	for rows.Next() {
		var cur string
		var sum money.Amount
		var n int64
		if err := rows.Scan(&cur, &sum, &n); err != nil {
			return r, err
		}
		r.CurrencySums[cur] = sum
		r.Entries += n
		if !sum.IsZero() {
			r.OK = false
		}
	}
	if err := rows.Err(); err != nil {
		return r, err
	}
	var bad []struct {
		WalletID string `db:"wallet_id"`
		Kind     string `db:"kind"`
	}
	err = sqlx.SelectContext(ctx, q, &bad, `
		WITH sums AS (SELECT wallet_id, sum(amount) AS total FROM ledger_entries WHERE wallet_id IS NOT NULL GROUP BY wallet_id)
		SELECT w.wallet_id, CASE WHEN w.available_balance < 0 THEN 'negative' ELSE 'mismatch' END AS kind
		FROM wallets w LEFT JOIN sums s USING (wallet_id)
		WHERE w.current_balance <> coalesce(s.total, 0) OR w.available_balance < 0`)
	if err != nil {
		return r, fmt.Errorf("wallet sums: %w", err)
	}
	for _, b := range bad {
		r.OK = false
		if b.Kind == "negative" {
			r.NegativeWallets = append(r.NegativeWallets, b.WalletID)
		} else {
			r.WalletMismatch = append(r.WalletMismatch, b.WalletID)
		}
	}
	// Held funds against open holds, in one statement: one snapshot of wallets and
	// the rows holding their money. A hold naming no wallet that exists is a
	// mismatch too (its wallet's held is then taken as zero).
	err = sqlx.SelectContext(ctx, q, &r.HoldMismatches, `
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
	if len(r.HoldMismatches) > 0 {
		r.OK = false
	}
	if err := sqlx.GetContext(ctx, q, &r.Wallets, `SELECT count(*) FROM wallets`); err != nil {
		return r, err
	}
	return r, nil
}
