package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"paysvc/actors/aggregates/wallet"
	"paysvc/actors/values/money"
)

const walletColumns = `wallet_id, merchant_id, currency, wallet_type, label, can_disburse,
	current_balance, available_balance, version, created_at, updated_at`

// InsertWallet creates a wallet row directly. Only merchant provisioning uses it,
// for the settlement wallet of a merchant no engine has seen yet; every later change
// goes through the engine.
func InsertWallet(ctx context.Context, ext sqlx.ExtContext, s wallet.State) error {
	_, err := sqlx.NamedExecContext(ctx, ext, `INSERT INTO wallets (`+walletColumns+`) VALUES (
		:wallet_id, :merchant_id, :currency, :wallet_type, :label, :can_disburse,
		:current_balance, :available_balance, :version, :created_at, :updated_at)`, s)
	if err != nil {
		return fmt.Errorf("insert wallet: %w", err)
	}
	return nil
}

// ListWallets returns one page of a merchant's wallets, oldest first, and the total.
func ListWallets(ctx context.Context, q sqlx.QueryerContext, merchantID string, limit, offset int) ([]wallet.State, int, error) {
	var total int
	if err := sqlx.GetContext(ctx, q, &total, `SELECT count(*) FROM wallets WHERE merchant_id = $1`, merchantID); err != nil {
		return nil, 0, fmt.Errorf("count wallets: %w", err)
	}
	out := []wallet.State{}
	err := sqlx.SelectContext(ctx, q, &out, `SELECT `+walletColumns+` FROM wallets WHERE merchant_id = $1
		ORDER BY created_at, wallet_id LIMIT $2 OFFSET $3`, merchantID, limit, offset)
	if err != nil {
		return nil, 0, fmt.Errorf("list wallets: %w", err)
	}
	return out, total, nil
}

// GetWallet reads one of the merchant's wallets; another merchant's id is ErrNotFound.
func GetWallet(ctx context.Context, q sqlx.QueryerContext, merchantID, walletID string) (wallet.State, error) {
	var s wallet.State
	err := sqlx.GetContext(ctx, q, &s, `SELECT `+walletColumns+` FROM wallets WHERE merchant_id = $1 AND wallet_id = $2`, merchantID, walletID)
	if errors.Is(err, sql.ErrNoRows) {
		return s, ErrNotFound
	}
	if err != nil {
		return s, fmt.Errorf("get wallet: %w", err)
	}
	return s, nil
}

// SettlementWallet reads the merchant's settlement wallet of a currency.
func SettlementWallet(ctx context.Context, q sqlx.QueryerContext, merchantID, currency string) (wallet.State, error) {
	var s wallet.State
	err := sqlx.GetContext(ctx, q, &s, `SELECT `+walletColumns+` FROM wallets
		WHERE merchant_id = $1 AND currency = $2 AND wallet_type = 'SETTLEMENT'`, merchantID, currency)
	if errors.Is(err, sql.ErrNoRows) {
		return s, ErrNotFound
	}
	return s, err
}

// LoadWallets reads the snapshots of the given wallets of one merchant, for the
// engine to hydrate actors; missing ids are simply absent from the map.
func LoadWallets(ctx context.Context, q sqlx.QueryerContext, merchantID string, ids []string) (map[string]wallet.State, error) {
	var o Owned
	for _, id := range ids {
		o.Add(merchantID, id)
	}
	return LoadOwnedWallets(ctx, q, o)
}

// LoadOwnedWallets is LoadWallets for several merchants in one query (see
// LoadOwnedInvoices).
func LoadOwnedWallets(ctx context.Context, q sqlx.QueryerContext, o Owned) (map[string]wallet.State, error) {
	if len(o.IDs) == 0 {
		return map[string]wallet.State{}, nil
	}
	var rows []wallet.State
	err := sqlx.SelectContext(ctx, q, &rows, `SELECT `+walletColumns+` FROM unnest($1::text[], $2::text[]) AS k(m, id)
		JOIN wallets ON wallet_id = k.id AND merchant_id = k.m`, pq.StringArray(o.Merchants), pq.StringArray(o.IDs))
	if err != nil {
		return nil, fmt.Errorf("load wallets: %w", err)
	}
	out := make(map[string]wallet.State, len(rows))
	for _, r := range rows {
		out[r.WalletID] = r
	}
	return out, nil
}

// WalletIDTaken reports whether any merchant has a wallet with this id.
func WalletIDTaken(ctx context.Context, q sqlx.QueryerContext, walletID string) (bool, error) {
	var n int
	err := sqlx.GetContext(ctx, q, &n, `SELECT count(*) FROM wallets WHERE wallet_id = $1`, walletID)
	return n > 0, err
}

// WalletByLabel reads the merchant's wallet of a currency with the label
// (case-insensitive), for the engine to hydrate it by that key.
func WalletByLabel(ctx context.Context, q sqlx.QueryerContext, merchantID, currency, label string) (wallet.State, error) {
	var s wallet.State
	err := sqlx.GetContext(ctx, q, &s, `SELECT `+walletColumns+` FROM wallets
		WHERE merchant_id = $1 AND currency = $2 AND lower(label) = lower($3) LIMIT 1`, merchantID, currency, label)
	if errors.Is(err, sql.ErrNoRows) {
		return s, ErrNotFound
	}
	return s, err
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
