package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"paysvc/actors/values/money"
)

// WalletIDTaken reports whether any merchant has a wallet with this id.
func WalletIDTaken(ctx context.Context, q sqlx.QueryerContext, walletID string) (bool, error) {
	var n int
	err := sqlx.GetContext(ctx, q, &n, `SELECT count(*) FROM wallets WHERE wallet_id = $1`, walletID)
	return n > 0, err
}

// LabelTaken reports whether the merchant already has a wallet of that currency
// with the label (case-insensitive).
func LabelTaken(ctx context.Context, q sqlx.QueryerContext, merchantID, currency, label string) (bool, error) {
	var n int
	err := sqlx.GetContext(ctx, q, &n, `SELECT count(*) FROM wallets
		WHERE merchant_id = $1 AND currency = $2 AND lower(label) = lower($3)`, merchantID, currency, label)
	return n > 0, err
}

// StatementRow is one line of a wallet statement.
type StatementRow struct {
	EntryID        int64        `db:"entry_id"`
	TransactionID  string       `db:"transaction_id"`
	Currency       string       `db:"currency"`
	Value          money.Amount `db:"amount"`
	RunningBalance money.Amount `db:"running_balance"`
	Narrative      string       `db:"narrative"`
	TransType      string       `db:"trans_type"`
	CreatedAt      time.Time    `db:"created_at"`
}

// Statement returns one page of a wallet's entries, newest first, and the total.
// The merchant scope is part of the query so a foreign wallet id reads as empty;
// callers check the wallet exists for the merchant first to answer 404.
func Statement(ctx context.Context, q sqlx.QueryerContext, merchantID, walletID string, limit, offset int) ([]StatementRow, int, error) {
	var total int
	if err := sqlx.GetContext(ctx, q, &total, `SELECT count(*) FROM ledger_entries
		WHERE wallet_id = $1 AND merchant_id = $2`, walletID, merchantID); err != nil {
		return nil, 0, fmt.Errorf("count statement: %w", err)
	}
	out := []StatementRow{}
	err := sqlx.SelectContext(ctx, q, &out, `SELECT entry_id, transaction_id, currency, amount, running_balance,
		narrative, trans_type, created_at FROM ledger_entries
		WHERE wallet_id = $1 AND merchant_id = $2 ORDER BY entry_id DESC LIMIT $3 OFFSET $4`,
		walletID, merchantID, limit, offset)
	if err != nil {
		return nil, 0, fmt.Errorf("statement: %w", err)
	}
	return out, total, nil
}
