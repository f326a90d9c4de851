package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// States of a payout send (table payout_sends).
const (
	// PayoutSendSending: claimed; the request may be on its way.
	PayoutSendSending = "SENDING"
	// PayoutSendAccepted: the provider took the payment; its outcome follows.
	PayoutSendAccepted = "ACCEPTED"
	// PayoutSendRefused: the provider refused it; nothing was paid.
	PayoutSendRefused = "REFUSED"
	// PayoutSendUnknown: no usable answer; the payment may have been made.
	PayoutSendUnknown = "UNKNOWN"
)

// PayoutSend is what a live payout rail did with one transaction.
type PayoutSend struct {
	TransactionID string    `db:"transaction_id"`
	Provider      string    `db:"provider"`
	State         string    `db:"state"`
	Reference     string    `db:"reference"`
	Description   string    `db:"description"`
	CreatedAt     time.Time `db:"created_at"`
	UpdatedAt     time.Time `db:"updated_at"`
}

// ClaimPayoutSend records, before a payment request leaves, that it is being sent.
// claimed is false when the transaction was claimed before (by this process or
// another): prior is then that claim, and the request must not be sent again.
func ClaimPayoutSend(ctx context.Context, q sqlx.ExtContext, transactionID, provider string) (prior PayoutSend, claimed bool, err error) {
	res, err := q.ExecContext(ctx, `INSERT INTO payout_sends (transaction_id, provider, state) VALUES ($1, $2, $3)
		ON CONFLICT (transaction_id) DO NOTHING`, transactionID, provider, PayoutSendSending)
	if err != nil {
		return PayoutSend{}, false, fmt.Errorf("claim payout send: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return PayoutSend{}, false, fmt.Errorf("claim payout send: %w", err)
	} else if n == 1 {
		return PayoutSend{}, true, nil
	}
	err = sqlx.GetContext(ctx, q, &prior, `SELECT * FROM payout_sends WHERE transaction_id = $1`, transactionID)
	if errors.Is(err, sql.ErrNoRows) {
		// Released between the insert and the select: the caller may try again.
		return PayoutSend{}, false, fmt.Errorf("claim payout send %s: released concurrently", transactionID)
	}
	if err != nil {
		return PayoutSend{}, false, fmt.Errorf("read payout send: %w", err)
	}
	return prior, false, nil
}

// SetPayoutSend records what came of a claimed send.
func SetPayoutSend(ctx context.Context, q sqlx.ExecerContext, transactionID, state, reference, description string) error {
	if _, err := q.ExecContext(ctx, `UPDATE payout_sends SET state = $2, reference = $3, description = $4, updated_at = now()
		WHERE transaction_id = $1`, transactionID, state, reference, description); err != nil {
		return fmt.Errorf("record payout send: %w", err)
	}
	return nil
}

// ReleasePayoutSend drops a claim whose request certainly never left (the
// connection could not be made), so a later submission sends it.
func ReleasePayoutSend(ctx context.Context, q sqlx.ExecerContext, transactionID string) error {
	if _, err := q.ExecContext(ctx, `DELETE FROM payout_sends WHERE transaction_id = $1 AND state = $2`,
		transactionID, PayoutSendSending); err != nil {
		return fmt.Errorf("release payout send: %w", err)
	}
	return nil
}

// UnsettledPayoutSends lists the transactions of provider whose send is SENDING,
// ACCEPTED or UNKNOWN, last updated before before, and whose payout transaction
// is still PENDING or PROCESSING: their outcome has not come. Oldest first.
// Only merchants of environment are read, each merchant's oldest first in turn
// (fairTurn).
func UnsettledPayoutSends(ctx context.Context, q sqlx.QueryerContext, environment, provider string, before time.Time, limit int) ([]string, error) {
	var out []string
	if err := sqlx.SelectContext(ctx, q, &out, `SELECT transaction_id FROM (
		SELECT s.transaction_id, s.updated_at,
		       row_number() OVER (PARTITION BY t.merchant_id ORDER BY s.updated_at, s.transaction_id) AS turn
		  FROM payout_sends s JOIN payout_transactions t ON t.transaction_id = s.transaction_id
		  JOIN merchants m ON m.merchant_id = t.merchant_id
		 WHERE s.provider = $1 AND s.state IN ($2, $3, $4) AND s.updated_at < $5
		   AND t.status IN ('PENDING', 'PROCESSING') AND m.environment = $7) x
		 ORDER BY `+fairTurn+`, updated_at, transaction_id LIMIT $6`,
		provider, PayoutSendSending, PayoutSendAccepted, PayoutSendUnknown, before, limit, environment); err != nil {
		return nil, fmt.Errorf("unsettled payout sends: %w", err)
	}
	return out, nil
}

// GetPayoutSend returns what a live payout rail did with a transaction, or
// ErrNotFound when it was never sent (no claim).
func GetPayoutSend(ctx context.Context, q sqlx.QueryerContext, transactionID string) (PayoutSend, error) {
	return lookup[PayoutSend](ctx, q, "read payout send", `SELECT * FROM payout_sends WHERE transaction_id = $1`, transactionID)
}

// DuePayoutTxns returns which of the given transactions may be sent now, with
// their status: PENDING (never handed to a rail) or PROCESSING (a rail has it), in
// a file being paid that no operator holds, of an enabled merchant of
// environment. The rails ask just before each send, so a transaction that a result
// finished meanwhile (its hold released or paid out) is never sent, nor one whose
// merchant an operator disabled, or whose file an operator held, after approval.
func DuePayoutTxns(ctx context.Context, q sqlx.QueryerContext, environment string, transactionIDs []string) (map[string]string, error) {
	var due []struct {
		ID     string `db:"transaction_id"`
		Status string `db:"status"`
	}
	if err := sqlx.SelectContext(ctx, q, &due, `SELECT t.transaction_id, t.status
		  FROM payout_transactions t JOIN payout_files f ON f.file_id = t.file_id
		  JOIN merchants m ON m.merchant_id = f.merchant_id
		 WHERE t.transaction_id = ANY($1) AND t.status IN ('PENDING', 'PROCESSING') AND f.status = 'PROCESSING'
		   AND NOT `+payoutFileHeld+` AND m.enabled AND m.environment = $2`,
		pq.StringArray(transactionIDs), environment); err != nil {
		return nil, fmt.Errorf("due payout transactions: %w", err)
	}
	out := make(map[string]string, len(due))
	for _, d := range due {
		out[d.ID] = d.Status
	}
	return out, nil
}

// payoutFileHeld is true for a file f an operator holds (paysvc payout hold):
// payout.Header.OnHold, in the file's stored header.
const payoutFileHeld = `coalesce((f.data ->> 'on_hold')::boolean, false)`
