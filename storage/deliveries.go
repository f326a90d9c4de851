package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// Delivery is one event to one webhook, with what is needed to send it.
type Delivery struct {
	EventID    string    `db:"event_id"`
	WebhookID  string    `db:"webhook_id"`
	MerchantID string    `db:"merchant_id"`
	Topic      string    `db:"topic"`
	Body       []byte    `db:"body"`
	Status     string    `db:"status"`
	Attempts   int       `db:"attempts"`
	CreatedAt  time.Time `db:"created_at"`
	UpdatedAt  time.Time `db:"updated_at"`
	LastStatus *int      `db:"last_status"`
	LastError  *string   `db:"last_error"`
	Endpoint   string    `db:"endpoint"`
	Challenge  string    `db:"challenge"`
	IsActive   bool      `db:"is_active"`
}

// SubscribedWebhooks returns the merchant's active webhooks subscribed to a topic.
func SubscribedWebhooks(ctx context.Context, q sqlx.QueryerContext, merchantID, topic string) ([]Webhook, error) {
	col := map[string]string{"collection_event": "collection_event", "send_money_event": "send_money_event",
		"reversal_event": "reversal_event", "wallet_transfer_event": "wallet_transfer_event", "subscription_event": "subscription_event"}[topic]
	if col == "" {
		return nil, nil
	}
	var out []Webhook
	err := sqlx.SelectContext(ctx, q, &out, `SELECT `+webhookColumns+` FROM webhooks
		WHERE merchant_id = $1 AND is_active AND `+col, merchantID)
	return out, err
}

// InsertDelivery records an event for a webhook once (a redelivered event is ignored).
func InsertDelivery(ctx context.Context, ext sqlx.ExtContext, eventID, webhookID, merchantID, topic string, body []byte) error {
	_, err := ext.ExecContext(ctx, `INSERT INTO webhook_deliveries (event_id, webhook_id, merchant_id, topic, body)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`, eventID, webhookID, merchantID, topic, body)
	return err
}

// ClaimDeliveries leases up to limit due deliveries (status PROCESSING, next attempt
// pushed out by lease so a dispatcher that dies lets another retry them).
func ClaimDeliveries(ctx context.Context, db *sqlx.DB, lease time.Duration, limit int) ([]Delivery, error) {
	var out []Delivery
	err := sqlx.SelectContext(ctx, db, &out, `WITH due AS (
			SELECT event_id, webhook_id FROM webhook_deliveries
			WHERE status IN ('PENDING', 'PROCESSING') AND next_attempt_at <= now()
			ORDER BY next_attempt_at LIMIT $2 FOR UPDATE SKIP LOCKED)
		UPDATE webhook_deliveries d SET status = 'PROCESSING', next_attempt_at = now() + $1 * interval '1 millisecond', updated_at = now()
		FROM due, webhooks w
		WHERE d.event_id = due.event_id AND d.webhook_id = due.webhook_id AND w.webhook_id = d.webhook_id
		RETURNING d.event_id, d.webhook_id, d.merchant_id, d.topic, d.body, d.status, d.attempts, d.created_at, d.updated_at,
			d.last_status, d.last_error, w.endpoint, w.challenge, w.is_active`, lease.Milliseconds(), limit)
	return out, err
}

// RecordAttempt stores one attempt.
func RecordAttempt(ctx context.Context, ext sqlx.ExtContext, eventID, webhookID string, status *int, latency time.Duration, errText *string, replay bool) error {
	_, err := ext.ExecContext(ctx, `INSERT INTO webhook_attempts (event_id, webhook_id, http_status, latency_ms, error, replay)
		VALUES ($1, $2, $3, $4, $5, $6)`, eventID, webhookID, status, latency.Milliseconds(), errText, replay)
	return err
}

// FinishDelivery sets a delivery's outcome after an attempt: DELIVERED, FAILED, or
// PENDING again at next. It returns the webhook's consecutive failure count.
func FinishDelivery(ctx context.Context, db *sqlx.DB, d Delivery, status string, next time.Time, httpStatus *int, errText *string) (int, error) {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if _, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET status = $3, attempts = attempts + 1, next_attempt_at = $4,
		last_status = $5, last_error = $6, updated_at = now() WHERE event_id = $1 AND webhook_id = $2`,
		d.EventID, d.WebhookID, status, next, httpStatus, errText); err != nil {
		return 0, fmt.Errorf("finish delivery: %w", err)
	}
	var failures int
	q := `UPDATE webhooks SET failures_count = failures_count + 1, updated_at = now() WHERE webhook_id = $1 RETURNING failures_count`
	if status == "DELIVERED" {
		q = `UPDATE webhooks SET failures_count = 0, updated_at = now() WHERE webhook_id = $1 RETURNING failures_count`
	}
	if err := tx.QueryRowxContext(ctx, q, d.WebhookID).Scan(&failures); err != nil {
		return 0, fmt.Errorf("webhook failures: %w", err)
	}
	return failures, tx.Commit()
}

// DisableWebhook turns a webhook off (its failure threshold was reached).
func DisableWebhook(ctx context.Context, ext sqlx.ExtContext, webhookID string) error {
	_, err := ext.ExecContext(ctx, `UPDATE webhooks SET is_active = false, updated_at = now() WHERE webhook_id = $1`, webhookID)
	return err
}

// ListDeliveries returns one page of the merchant's delivery records, newest first,
// filtered by topic and status when given, and the total.
func ListDeliveries(ctx context.Context, q sqlx.QueryerContext, merchantID, topic, status string, since time.Time, limit, offset int) ([]Delivery, int, error) {
	where := `d.merchant_id = $1 AND ($2 = '' OR d.topic = $2) AND ($3 = '' OR d.status = $3) AND d.created_at >= $4`
	var total int
	if err := sqlx.GetContext(ctx, q, &total, `SELECT count(*) FROM webhook_deliveries d WHERE `+where, merchantID, topic, status, since); err != nil {
		return nil, 0, err
	}
	out := []Delivery{}
	err := sqlx.SelectContext(ctx, q, &out, `SELECT d.event_id, d.webhook_id, d.merchant_id, d.topic, d.body, d.status, d.attempts,
		d.created_at, d.updated_at, d.last_status, d.last_error, w.endpoint, '' AS challenge, w.is_active
		FROM webhook_deliveries d JOIN webhooks w USING (webhook_id) WHERE `+where+`
		ORDER BY d.created_at DESC LIMIT $5 OFFSET $6`, merchantID, topic, status, since, limit, offset)
	return out, total, err
}

// EventDeliveries returns the merchant's deliveries of one event, with secrets, for replay.
func EventDeliveries(ctx context.Context, q sqlx.QueryerContext, merchantID, eventID string) ([]Delivery, error) {
	var out []Delivery
	err := sqlx.SelectContext(ctx, q, &out, `SELECT d.event_id, d.webhook_id, d.merchant_id, d.topic, d.body, d.status, d.attempts,
		d.created_at, d.updated_at, d.last_status, d.last_error, w.endpoint, w.challenge, w.is_active
		FROM webhook_deliveries d JOIN webhooks w USING (webhook_id) WHERE d.merchant_id = $1 AND d.event_id = $2`, merchantID, eventID)
	return out, err
}
