package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"paysvc/topics"
)

// PayoutKind is the payment files' kind in the batch commit (paysvc_apply_payout).
const PayoutKind = "payout"

// PayoutFileID finds one of the merchant's files by file id or tracking id (either
// may be empty); another merchant's file is ErrNotFound.
func PayoutFileID(ctx context.Context, q sqlx.QueryerContext, merchantID, fileID, trackingID string) (string, error) {
	var id string
	var err error
	switch {
	case fileID != "":
		err = sqlx.GetContext(ctx, q, &id, `SELECT file_id FROM payout_files WHERE merchant_id = $1 AND file_id = $2`, merchantID, fileID)
	case trackingID != "":
		err = sqlx.GetContext(ctx, q, &id, `SELECT file_id FROM payout_files WHERE merchant_id = $1 AND tracking_id::text = $2`, merchantID, trackingID)
	default:
		return "", ErrNotFound
	}
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("find payment file: %w", err)
	}
	return id, nil
}

// PayoutFileMerchant returns the merchant of a payment file (an operator names a
// file by its id alone), or ErrNotFound.
func PayoutFileMerchant(ctx context.Context, q sqlx.QueryerContext, fileID string) (string, error) {
	return lookup[string](ctx, q, "find payment file", `SELECT merchant_id FROM payout_files WHERE file_id = $1`, fileID)
}

// PayoutIDsTaken reports whether a file id or any of the transaction ids is in
// use by any merchant (ids come from the API; a clash must be a refusal, not a
// primary-key failure of the engine's batch).
func PayoutIDsTaken(ctx context.Context, q sqlx.QueryerContext, fileID string, txnIDs []string) (bool, error) {
	var taken bool
	err := sqlx.GetContext(ctx, q, &taken, `SELECT EXISTS (SELECT 1 FROM payout_files WHERE file_id = $1)
		OR EXISTS (SELECT 1 FROM payout_transactions WHERE transaction_id = ANY($2))`, fileID, pq.StringArray(txnIDs))
	if err != nil {
		return false, fmt.Errorf("payout ids taken: %w", err)
	}
	return taken, nil
}

// ClaimedPayoutKeys returns which of the keys a transaction of the merchant holds
// already (key -> that transaction's id).
func ClaimedPayoutKeys(ctx context.Context, q sqlx.QueryerContext, merchantID string, keys []string) (map[string]string, error) {
	out := map[string]string{}
	if len(keys) == 0 {
		return out, nil
	}
	rows, err := q.QueryxContext(ctx, `SELECT idempotency_key, transaction_id FROM payout_transactions
		WHERE merchant_id = $1 AND claims_key AND idempotency_key = ANY($2)`, merchantID, pq.StringArray(keys))
	if err != nil {
		return nil, fmt.Errorf("claimed payout keys: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k, id string
		if err := rows.Scan(&k, &id); err != nil {
			return nil, err
		}
		out[k] = id
	}
	return out, rows.Err()
}

// Beneficiary is a recipient the merchant paid successfully.
type Beneficiary struct {
	Account          string    `db:"account"`
	Provider         string    `db:"provider"`
	Name             string    `db:"name"`
	AccountReference string    `db:"account_reference"`
	BankCode         string    `db:"bank_code"`
	Payments         int       `db:"payments"`
	LastPaid         time.Time `db:"last_paid"`
}

// FrequentBeneficiaries lists the recipients of the merchant's completed payouts,
// most paid first (then most recent). provider "" means every provider.
func FrequentBeneficiaries(ctx context.Context, q sqlx.QueryerContext, merchantID, provider string, limit int) ([]Beneficiary, error) {
	return selectAll[Beneficiary](ctx, q, "frequent beneficiaries", `SELECT account, provider,
			coalesce(max(data ->> 'name'), '') AS name,
			coalesce(data ->> 'account_reference', '') AS account_reference,
			coalesce(data ->> 'bank_code', '') AS bank_code,
			count(*) AS payments, max(updated_at) AS last_paid
		  FROM payout_transactions
		 WHERE merchant_id = $1 AND status = 'COMPLETE' AND ($2 = '' OR provider = $2)
		 GROUP BY account, provider, data ->> 'account_reference', data ->> 'bank_code'
		 ORDER BY payments DESC, last_paid DESC
		 LIMIT $3`, merchantID, provider, limit)
}

// Recipient is the owner of a wallet that a P2P payout pays.
type Recipient struct {
	MerchantID   string `db:"merchant_id"`
	MerchantName string `db:"name"`
	WalletID     string `db:"wallet_id"`
	Currency     string `db:"currency"`
	WalletType   string `db:"wallet_type"`
}

// WalletRecipient returns who owns any wallet of an environment (P2P payouts pay
// another merchant's wallet by its id); a wallet of a disabled merchant, or of the
// other environment (money never crosses between sandbox and live), is ErrNotFound.
func WalletRecipient(ctx context.Context, q sqlx.QueryerContext, walletID, environment string) (Recipient, error) {
	return lookup[Recipient](ctx, q, "wallet recipient", `SELECT w.merchant_id, m.name, w.wallet_id, w.currency, w.wallet_type FROM wallets w
		JOIN merchants m ON m.merchant_id = w.merchant_id WHERE w.wallet_id = $1 AND m.enabled AND m.environment = $2`, walletID, environment)
}

// EmailRecipient returns the settlement wallet of currency of the one enabled
// merchant of environment whose email (merchants.email, compared without regard to
// case) is email: what a P2P payout to an email pays. No such merchant, no such
// wallet, and an address that more than one merchant has are all ErrNotFound,
// alike, so the answer tells the payer no more than a payout would.
func EmailRecipient(ctx context.Context, q sqlx.QueryerContext, email, currency, environment string) (Recipient, error) {
	return lookup[Recipient](ctx, q, "email recipient", `WITH named AS (
		SELECT merchant_id, name FROM merchants WHERE lower(email) = lower($1) AND enabled AND environment = $3)
		SELECT m.merchant_id, m.name, w.wallet_id, w.currency, w.wallet_type
		  FROM named m JOIN wallets w ON w.merchant_id = m.merchant_id AND w.wallet_type = 'SETTLEMENT' AND w.currency = $2
		 WHERE (SELECT count(*) FROM named) = 1`, email, currency, environment)
}

// StalePayout is a transaction of a file being paid that has no outcome yet.
type StalePayout struct {
	FileID, MerchantID, Provider, Currency string
	Txn                                    topics.PayoutRailTxn
}

// StalePayouts lists transactions (not P2P: those are commands, never lost) of
// files being paid that have been waiting for their outcome since before, in
// file order.
//
// Only enabled merchants of environment are read, and files no operator holds:
// their transactions wait, and are recovered once the merchant is enabled or the
// file released. Fairly: each merchant's turn
// holds 100 of its transactions (a rail chunk), and every merchant's turn comes
// before any merchant's next one (fairTurn).
func StalePayouts(ctx context.Context, q sqlx.QueryerContext, environment string, before time.Time, limit int) ([]StalePayout, error) {
	rows, err := q.QueryxContext(ctx, `SELECT file_id, merchant_id, provider, currency, data FROM (
		SELECT t.file_id, t.merchant_id, t.provider, f.data ->> 'currency' AS currency, t.data, t.seq,
		       row_number() OVER (PARTITION BY t.merchant_id ORDER BY t.file_id, t.seq) AS turn
		  FROM payout_transactions t JOIN payout_files f ON f.file_id = t.file_id
		  JOIN merchants m ON m.merchant_id = t.merchant_id
		 WHERE t.status IN ('PENDING', 'PROCESSING') AND f.status = 'PROCESSING' AND t.provider <> 'P2P'
		   AND t.updated_at < $1 AND m.environment = $3 AND m.enabled AND NOT `+payoutFileHeld+`) x
		 ORDER BY (turn - 1) / 100, file_id, seq LIMIT $2`, before, limit, environment)
	if err != nil {
		return nil, fmt.Errorf("stale payouts: %w", err)
	}
	defer rows.Close()
	var out []StalePayout
	for rows.Next() {
		var s StalePayout
		var data []byte
		if err := rows.Scan(&s.FileID, &s.MerchantID, &s.Provider, &s.Currency, &data); err != nil {
			return nil, err
		}
		// The rail's fields of a stored transaction (payout.Txn) have the same
		// JSON names in topics.PayoutRailTxn; the rest of the row is not the rail's.
		if err := json.Unmarshal(data, &s.Txn); err != nil {
			return nil, fmt.Errorf("decode payment transaction: %w", err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// PayoutFileOperatorState is what an operator did to a file: whether it is held,
// whether its unsent transactions were failed, and the last action.
type PayoutFileOperatorState struct {
	OnHold           bool       `db:"on_hold"`
	FailedByOperator bool       `db:"failed_by_operator"`
	LastAction       string     `db:"last_action"`
	LastReason       string     `db:"last_reason"`
	LastAt           *time.Time `db:"last_at"`
}

// PayoutFileOperator reads the operator's marks on one of the merchant's files
// from its stored header (payout.Header); another merchant's file is
// ErrNotFound.
func PayoutFileOperator(ctx context.Context, q sqlx.QueryerContext, merchantID, fileID string) (PayoutFileOperatorState, error) {
	return lookup[PayoutFileOperatorState](ctx, q, "payment file operator state", `SELECT coalesce((f.data ->> 'on_hold')::boolean, false) AS on_hold,
			coalesce((f.data ->> 'failed_by_operator')::boolean, false) AS failed_by_operator,
			coalesce(f.data -> 'operator_actions' -> -1 ->> 'action', '') AS last_action,
			coalesce(f.data -> 'operator_actions' -> -1 ->> 'reason', '') AS last_reason,
			(f.data -> 'operator_actions' -> -1 ->> 'at')::timestamptz AS last_at
		  FROM payout_files f WHERE f.merchant_id = $1 AND f.file_id = $2`, merchantID, fileID)
}

// PayoutRef locates a payout transaction by its id alone (a provider's result
// names only the transaction).
type PayoutRef struct {
	FileID     string `db:"file_id"`
	MerchantID string `db:"merchant_id"`
	Provider   string `db:"provider"`
	Amount     string `db:"amount"` // the transaction's amount, as its decimal text
}

// PayoutTxnRef returns the file, merchant, provider and amount of a transaction, or
// ErrNotFound.
func PayoutTxnRef(ctx context.Context, q sqlx.QueryerContext, transactionID string) (PayoutRef, error) {
	return lookup[PayoutRef](ctx, q, "find payout transaction", `SELECT file_id, merchant_id, provider, coalesce(data->>'amount', '') AS amount
		FROM payout_transactions WHERE transaction_id = $1`, transactionID)
}
