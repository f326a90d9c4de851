package storage

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"paysvc/actors/money"
)

// LedgerReport is the result of CheckLedger. OK is true when every currency sums to
// zero and every wallet snapshot equals the sum of its entries.
type LedgerReport struct {
	OK              bool                    `json:"ok"`
	Entries         int64                   `json:"entries"`
	Wallets         int64                   `json:"wallets"`
	CurrencySums    map[string]money.Amount `json:"currency_sums"`
	WalletMismatch  []string                `json:"wallet_mismatches"`
	NegativeWallets []string                `json:"negative_wallets"`
}

// CheckLedger verifies conservation on a live database: it can run at any time
// because committed batches are always balanced.
func CheckLedger(ctx context.Context, q sqlx.QueryerContext) (LedgerReport, error) {
	r := LedgerReport{CurrencySums: map[string]money.Amount{}, WalletMismatch: []string{}, NegativeWallets: []string{}}
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
	if err := sqlx.GetContext(ctx, q, &r.Wallets, `SELECT count(*) FROM wallets`); err != nil {
		return r, err
	}
	return r, nil
}
