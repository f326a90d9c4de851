package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// PayRequest is a stored pay request.
type PayRequest struct {
	RequestID        string     `db:"request_id"`
	MerchantID       string     `db:"merchant_id"`
	CheckoutID       string     `db:"checkout_id"`
	FirstName        string     `db:"first_name"`
	LastName         string     `db:"last_name"`
	Email            string     `db:"email"`
	Reason           string     `db:"reason"`
	AutosendReminder int        `db:"autosend_reminder"`
	ReminderDueAt    *time.Time `db:"reminder_due_at"`
	ReminderSent     bool       `db:"reminder_sent"`
	SentStatus       string     `db:"sent_status"`
	FailedDetails    *string    `db:"failed_details"`
	Archived         bool       `db:"archived"`
	CreatedAt        time.Time  `db:"created_at"`
	UpdatedAt        time.Time  `db:"updated_at"`
}

const payRequestColumns = `request_id, merchant_id, checkout_id, first_name, last_name, email, reason, autosend_reminder,
	reminder_due_at, reminder_sent, sent_status, failed_details, archived, created_at, updated_at`

// InsertPayRequest stores a pay request together with its checkout session.
func InsertPayRequest(ctx context.Context, db *sqlx.DB, co Checkout, pr PayRequest) error {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if err := InsertCheckout(ctx, tx, co); err != nil {
		return err
	}
	if _, err := sqlx.NamedExecContext(ctx, tx, `INSERT INTO pay_requests (`+payRequestColumns+`) VALUES (
		:request_id, :merchant_id, :checkout_id, :first_name, :last_name, :email, :reason, :autosend_reminder,
		:reminder_due_at, :reminder_sent, :sent_status, :failed_details, :archived, :created_at, :updated_at)`, pr); err != nil {
		return fmt.Errorf("insert pay request: %w", idTaken(err, "pay_requests"))
	}
	return tx.Commit()
}

// GetPayRequest reads one of the merchant's pay requests.
func GetPayRequest(ctx context.Context, q sqlx.QueryerContext, merchantID, requestID string) (PayRequest, error) {
	return getOne[PayRequest](ctx, q, `SELECT `+payRequestColumns+` FROM pay_requests WHERE merchant_id = $1 AND request_id = $2`,
		merchantID, requestID)
}

// SetPayRequestSent records the outcome of the first email.
func SetPayRequestSent(ctx context.Context, ext sqlx.ExtContext, requestID, status string, failed *string) error {
	_, err := ext.ExecContext(ctx, `UPDATE pay_requests SET sent_status = $2, failed_details = $3, updated_at = now()
		WHERE request_id = $1`, requestID, status, failed)
	return err
}

// ClaimDueReminders marks up to limit due, unsent reminders of unpaid requests as
// sent and returns them: whoever claims a reminder sends it, so it goes once even
// with several instances. A failed send is given back with ReleaseReminder.
func ClaimDueReminders(ctx context.Context, db *sqlx.DB, now time.Time, limit int) ([]PayRequest, error) {
	var out []PayRequest
	err := sqlx.SelectContext(ctx, db, &out, `UPDATE pay_requests p SET reminder_sent = true, updated_at = now()
		WHERE p.request_id IN (
			SELECT r.request_id FROM pay_requests r
			WHERE NOT r.reminder_sent AND r.reminder_due_at <= $1 AND NOT r.archived AND r.sent_status = 'SENT'
			  AND NOT EXISTS (SELECT 1 FROM invoices i WHERE i.data ? 'checkout_id'
			                  AND i.data ->> 'checkout_id' = r.checkout_id::text AND i.state = 'COMPLETE')
			ORDER BY r.reminder_due_at LIMIT $2 FOR UPDATE SKIP LOCKED)
		RETURNING `+payRequestColumns, now, limit)
	return out, err
}

// ReleaseReminder gives a claimed reminder back after a failed send: to be tried
// again, or (retry false: the recipient was refused for good) never.
func ReleaseReminder(ctx context.Context, ext sqlx.ExtContext, requestID, details string, retry bool) error {
	_, err := ext.ExecContext(ctx, `UPDATE pay_requests SET reminder_sent = false, failed_details = $2,
		reminder_due_at = CASE WHEN $3 THEN reminder_due_at ELSE NULL END, updated_at = now()
		WHERE request_id = $1`, requestID, details, retry)
	return err
}

// PayRequestReason is the reason of the pay request that sent a checkout session
// ("" when the session was not sent by one), for the session's hosted page.
func PayRequestReason(ctx context.Context, q sqlx.QueryerContext, checkoutID string) (string, error) {
	var reason string
	err := sqlx.GetContext(ctx, q, &reason, `SELECT reason FROM pay_requests WHERE checkout_id = $1::uuid
		ORDER BY created_at DESC LIMIT 1`, checkoutID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return reason, err
}
