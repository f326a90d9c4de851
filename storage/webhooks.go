package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// Webhook is a merchant's endpoint configuration. Challenge (the key of
// X-SERVICE-Signature) and SigningSecret (the key of the Standard Webhooks
// signature) are secrets: callers must never return them, except SigningSecret
// once, when it is made.
type Webhook struct {
	WebhookID           string    `db:"webhook_id"`
	MerchantID          string    `db:"merchant_id"`
	Endpoint            string    `db:"endpoint"`
	Challenge           string    `db:"challenge"`
	IsActive            bool      `db:"is_active"`
	CollectionEvent     bool      `db:"collection_event"`
	SendMoneyEvent      bool      `db:"send_money_event"`
	ReversalEvent       bool      `db:"reversal_event"`
	WalletTransferEvent bool      `db:"wallet_transfer_event"`
	SubscriptionEvent   bool      `db:"subscription_event"`
	FailuresCount       int       `db:"failures_count"`
	CreatedAt           time.Time `db:"created_at"`
	UpdatedAt           time.Time `db:"updated_at"`
	// IncludeChallenge: delivery bodies echo the challenge (opt-in; see
	// docs/security.md for the risk).
	IncludeChallenge bool   `db:"include_challenge"`
	SigningSecret    []byte `db:"signing_secret"`
	// PreviousSigningSecret is the key the last rotation retired, a secret like
	// SigningSecret and never returned; it still signs beside SigningSecret until
	// PreviousSecretExpiresAt (migration 0065). Both nil when there is none.
	PreviousSigningSecret   []byte     `db:"previous_signing_secret"`
	PreviousSecretExpiresAt *time.Time `db:"previous_secret_expires_at"`
}

const webhookColumns = `webhook_id, merchant_id, endpoint, challenge, is_active, collection_event, send_money_event,
	reversal_event, wallet_transfer_event, subscription_event, failures_count, created_at, updated_at,
	include_challenge, signing_secret, previous_signing_secret, previous_secret_expires_at`

// InsertWebhook stores a new webhook.
func InsertWebhook(ctx context.Context, ext sqlx.ExtContext, w Webhook) error {
	_, err := sqlx.NamedExecContext(ctx, ext, `INSERT INTO webhooks (`+webhookColumns+`) VALUES (:webhook_id, :merchant_id,
		:endpoint, :challenge, :is_active, :collection_event, :send_money_event, :reversal_event, :wallet_transfer_event,
		:subscription_event, :failures_count, :created_at, :updated_at, :include_challenge, :signing_secret,
		:previous_signing_secret, :previous_secret_expires_at)`, w)
	if err != nil {
		return fmt.Errorf("insert webhook: %w", idTaken(err, "webhooks"))
	}
	return nil
}

// ListWebhooks returns one page of the merchant's webhooks and the total.
func ListWebhooks(ctx context.Context, q sqlx.QueryerContext, merchantID string, limit, offset int) ([]Webhook, int, error) {
	return offsetPage[Webhook](ctx, q, "webhooks", "webhooks", webhookColumns, "created_at, webhook_id", merchantID, limit, offset)
}

// GetWebhook reads one of the merchant's webhooks.
func GetWebhook(ctx context.Context, q sqlx.QueryerContext, merchantID, webhookID string) (Webhook, error) {
	return getOne[Webhook](ctx, q, `SELECT `+webhookColumns+` FROM webhooks WHERE merchant_id = $1 AND webhook_id = $2`,
		merchantID, webhookID)
}

// UpdateWebhook writes a webhook's editable fields (scoped by merchant).
func UpdateWebhook(ctx context.Context, ext sqlx.ExtContext, w Webhook) error {
	res, err := sqlx.NamedExecContext(ctx, ext, `UPDATE webhooks SET endpoint = :endpoint, challenge = :challenge,
		is_active = :is_active, collection_event = :collection_event, send_money_event = :send_money_event,
		reversal_event = :reversal_event, wallet_transfer_event = :wallet_transfer_event,
		subscription_event = :subscription_event, failures_count = :failures_count,
		include_challenge = :include_challenge, signing_secret = :signing_secret,
		previous_signing_secret = :previous_signing_secret, previous_secret_expires_at = :previous_secret_expires_at, updated_at = now()
		WHERE webhook_id = :webhook_id AND merchant_id = :merchant_id`, w)
	if err != nil {
		return fmt.Errorf("update webhook: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrNotFound
	}
	return nil
}

// DeleteWebhook removes one of the merchant's webhooks.
//
// The delete cascades to the webhook's delivery queues, which the dispatchers lock
// first and the webhook row after (FinishDeliveries, InsertDeliveries). Deleting
// the webhook row first and its queues in the cascade took the same two locks in
// the other order, and a delete beside a busy dispatcher could end in a deadlock
// (a 500). So the queues are locked first here too, in the dispatchers' key order.
func DeleteWebhook(ctx context.Context, db *sqlx.DB, merchantID, webhookID string) error {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("delete webhook: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	var keys []QueueKey
	if err := sqlx.SelectContext(ctx, tx, &keys, `SELECT q.webhook_id, q.topic, q.src_partition, q.agg_key FROM webhook_queues q
		JOIN webhooks w USING (webhook_id) WHERE w.merchant_id = $1 AND q.webhook_id = $2`, merchantID, webhookID); err != nil {
		return fmt.Errorf("delete webhook: %w", err)
	}
	if len(keys) > 0 {
		qw, qt, qp, qa := queueArrays(keys)
		if _, err := tx.ExecContext(ctx, `SELECT 1 FROM webhook_queues q
			JOIN unnest($1::text[], $2::text[], $3::int[], $4::text[]) WITH ORDINALITY AS l(w, t, p, a, i)
				ON q.webhook_id = l.w AND q.topic = l.t AND q.src_partition = l.p AND q.agg_key = l.a
			ORDER BY l.i FOR UPDATE OF q`, qw, qt, qp, qa); err != nil {
			return fmt.Errorf("delete webhook: lock its queues: %w", err)
		}
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM webhooks WHERE merchant_id = $1 AND webhook_id = $2`, merchantID, webhookID)
	if err != nil {
		return fmt.Errorf("delete webhook: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return ErrNotFound
	}
	return tx.Commit()
}
