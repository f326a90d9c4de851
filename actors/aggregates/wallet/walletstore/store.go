package walletstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"paysvc/actors/aggregates/wallet"
	"paysvc/storage"
)

// Row is a wallet's row in the batch commit's typed arrays. A conversion, not a
// copy field by field: a field added to wallet.State that the row lacks does not
// compile, so no column can be forgotten.
func Row(s wallet.State) storage.WalletRow { return storage.WalletRow(s) }

// Touch records a wallet's new state in a batch's writes (storage.WalletWrites).
func Touch(w *storage.WalletWrites, before, after wallet.State) { w.Touch(before.Version, Row(after)) }

const walletColumns = `wallet_id, merchant_id, currency, wallet_type, label, can_disburse,
	current_balance, available_balance, version, created_at, updated_at`

// Insert creates a wallet row directly. Only merchant provisioning uses it,
// for the settlement wallet of a merchant no engine has seen yet; every later change
// goes through the engine.
func Insert(ctx context.Context, ext sqlx.ExtContext, s wallet.State) error {
	_, err := sqlx.NamedExecContext(ctx, ext, `INSERT INTO wallets (`+walletColumns+`) VALUES (
		:wallet_id, :merchant_id, :currency, :wallet_type, :label, :can_disburse,
		:current_balance, :available_balance, :version, :created_at, :updated_at)`, s)
	if err != nil {
		return fmt.Errorf("insert wallet: %w", err)
	}
	return nil
}

// List returns one page of a merchant's wallets, oldest first, and the total.
func List(ctx context.Context, q sqlx.QueryerContext, merchantID string, limit, offset int) ([]wallet.State, int, error) {
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

// Get reads one of the merchant's wallets; another merchant's id is storage.ErrNotFound.
func Get(ctx context.Context, q sqlx.QueryerContext, merchantID, walletID string) (wallet.State, error) {
	var s wallet.State
	err := sqlx.GetContext(ctx, q, &s, `SELECT `+walletColumns+` FROM wallets WHERE merchant_id = $1 AND wallet_id = $2`, merchantID, walletID)
	if errors.Is(err, sql.ErrNoRows) {
		return s, storage.ErrNotFound
	}
	if err != nil {
		return s, fmt.Errorf("get wallet: %w", err)
	}
	return s, nil
}

// Settlement reads the merchant's settlement wallet of a currency.
func Settlement(ctx context.Context, q sqlx.QueryerContext, merchantID, currency string) (wallet.State, error) {
	var s wallet.State
	err := sqlx.GetContext(ctx, q, &s, `SELECT `+walletColumns+` FROM wallets
		WHERE merchant_id = $1 AND currency = $2 AND wallet_type = 'SETTLEMENT'`, merchantID, currency)
	if errors.Is(err, sql.ErrNoRows) {
		return s, storage.ErrNotFound
	}
	return s, err
}

// Load reads the snapshots of the given wallets of one merchant, for the
// engine to hydrate actors; missing ids are simply absent from the map.
func Load(ctx context.Context, q sqlx.QueryerContext, merchantID string, ids []string) (map[string]wallet.State, error) {
	var o storage.Owned
	for _, id := range ids {
		o.Add(merchantID, id)
	}
	return LoadOwned(ctx, q, o)
}

// LoadOwned is Load for several merchants in one query (see
// invoicestore.LoadOwned).
func LoadOwned(ctx context.Context, q sqlx.QueryerContext, o storage.Owned) (map[string]wallet.State, error) {
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

// ByLabel reads the merchant's wallet of a currency with the label
// (case-insensitive), for the engine to hydrate it by that key.
func ByLabel(ctx context.Context, q sqlx.QueryerContext, merchantID, currency, label string) (wallet.State, error) {
	var s wallet.State
	err := sqlx.GetContext(ctx, q, &s, `SELECT `+walletColumns+` FROM wallets
		WHERE merchant_id = $1 AND currency = $2 AND lower(label) = lower($3) LIMIT 1`, merchantID, currency, label)
	if errors.Is(err, sql.ErrNoRows) {
		return s, storage.ErrNotFound
	}
	return s, err
}
