package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// PaymentLink is a merchant's payment link (migration 0029). Amount is in whole
// units of Currency; 0 lets the customer enter the amount. UsageLimit 0 is
// unlimited.
type PaymentLink struct {
	LinkID       string    `db:"link_id"`
	MerchantID   string    `db:"merchant_id"`
	Title        string    `db:"title"`
	IsActive     bool      `db:"is_active"`
	RedirectURL  *string   `db:"redirect_url"`
	Amount       int64     `db:"amount"`
	UsageLimit   int64     `db:"usage_limit"`
	Currency     string    `db:"currency"`
	MobileTarrif string    `db:"mobile_tarrif"`
	CardTarrif   string    `db:"card_tarrif"`
	CreatedAt    time.Time `db:"created_at"`
	UpdatedAt    time.Time `db:"updated_at"`
}

const paymentLinkColumns = `link_id, merchant_id, title, is_active, redirect_url, amount, usage_limit, currency,
	mobile_tarrif, card_tarrif, created_at, updated_at`

// LinkHolds bound how long an unfinished payment holds a use of its link's
// usage_limit (docs/api-decisions.md, "Payment links"). Without a bound, anyone
// holding a link's id could keep it busy with prompts nobody answers.
type LinkHolds struct {
	// Send: a use whose prompt no rail has accepted yet (no invoice yet, or a
	// PENDING one: queued for the rail, or on a sandbox phone) holds for this
	// long after it was reserved. Long enough for the rails role to send it;
	// it keeps two payers racing for a link's last use from both being prompted.
	Send time.Duration
	// Accepted: a use whose prompt the rail accepted (PROCESSING: Daraja answered
	// ResponseCode 0), or whose sending ended with an unknown outcome, holds for
	// this long after that. An STK prompt lapses on the phone in about a minute,
	// so its outcome is nearly always known well before.
	Accepted time.Duration
}

// DefaultLinkHolds are the holds of a server that configures none.
var DefaultLinkHolds = LinkHolds{Send: 2 * time.Minute, Accepted: 5 * time.Minute}

// InsertPaymentLink stores a new link.
func InsertPaymentLink(ctx context.Context, ext sqlx.ExtContext, l PaymentLink) error {
	_, err := ext.ExecContext(ctx, `INSERT INTO payment_links (link_id, merchant_id, title, is_active, redirect_url,
		amount, usage_limit, currency, mobile_tarrif, card_tarrif, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)`,
		l.LinkID, l.MerchantID, l.Title, l.IsActive, l.RedirectURL, l.Amount, l.UsageLimit, l.Currency,
		l.MobileTarrif, l.CardTarrif, l.CreatedAt)
	if err != nil {
		return fmt.Errorf("insert payment link: %w", err)
	}
	return nil
}

// GetPaymentLink reads one of the merchant's links; another merchant's, or an id
// that is not a link id, is ErrNotFound.
func GetPaymentLink(ctx context.Context, q sqlx.QueryerContext, merchantID, linkID string) (PaymentLink, error) {
	if !ValidCheckoutID(linkID) { // link ids are spelled like checkout ids (ids.UUID)
		return PaymentLink{}, ErrNotFound
	}
	return getOne[PaymentLink](ctx, q, `SELECT `+paymentLinkColumns+` FROM payment_links
		WHERE link_id = $2::uuid AND merchant_id = $1`, merchantID, linkID)
}

// PaymentLinkByID reads a link for its public page (the id is the capability).
func PaymentLinkByID(ctx context.Context, q sqlx.QueryerContext, linkID string) (PaymentLink, error) {
	if !ValidCheckoutID(linkID) {
		return PaymentLink{}, ErrNotFound
	}
	return getOne[PaymentLink](ctx, q, `SELECT `+paymentLinkColumns+` FROM payment_links WHERE link_id = $1::uuid`, linkID)
}

// ListPaymentLinks returns a page of the merchant's links, newest first, and how
// many it has.
func ListPaymentLinks(ctx context.Context, q sqlx.QueryerContext, merchantID string, limit, offset int) ([]PaymentLink, int, error) {
	return offsetPage[PaymentLink](ctx, q, "payment links", "payment_links", paymentLinkColumns, "created_at DESC, link_id DESC",
		merchantID, limit, offset)
}

// UpdatePaymentLink changes one of the merchant's links under its row lock: change
// gets the current link and edits it (an error from it aborts, nothing changes), so
// two concurrent updates never lose each other's fields.
func UpdatePaymentLink(ctx context.Context, db *sqlx.DB, merchantID, linkID string, change func(*PaymentLink) error) (PaymentLink, error) {
	var l PaymentLink
	if !ValidCheckoutID(linkID) {
		return l, ErrNotFound
	}
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return l, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	err = sqlx.GetContext(ctx, tx, &l, `SELECT `+paymentLinkColumns+` FROM payment_links
		WHERE link_id = $2::uuid AND merchant_id = $1 FOR UPDATE`, merchantID, linkID)
	if errors.Is(err, sql.ErrNoRows) {
		return l, ErrNotFound
	}
	if err != nil {
		return l, err
	}
	if err := change(&l); err != nil {
		return l, err
	}
	err = sqlx.GetContext(ctx, tx, &l.UpdatedAt, `UPDATE payment_links SET title = $2, is_active = $3, redirect_url = $4,
		amount = $5, usage_limit = $6, currency = $7, mobile_tarrif = $8, card_tarrif = $9, updated_at = now()
		WHERE link_id = $1::uuid RETURNING updated_at`,
		l.LinkID, l.Title, l.IsActive, l.RedirectURL, l.Amount, l.UsageLimit, l.Currency, l.MobileTarrif, l.CardTarrif)
	if err != nil {
		return l, fmt.Errorf("update payment link: %w", err)
	}
	return l, tx.Commit()
}

// LinkUsage is how much of a link's usage_limit its payments take.
type LinkUsage struct {
	Completed int64 `db:"completed"`
	InFlight  int64 `db:"in_flight"`
}

// linkUsageQuery counts a link's uses: completed, and in flight under the holds
// ($2 Send and $3 Accepted, in seconds). A held invoice (paid another amount than
// asked, waiting for an operator) is money received: it holds its use without
// bound. An invoice that completes after its hold ran out counts as completed like
// any other: the payment is never refused or lost for it, and the link may then
// have more completed payments than its limit.
const linkUsageQuery = `SELECT count(*) FILTER (WHERE i.state = 'COMPLETE') AS completed,
	count(*) FILTER (WHERE (i.state = 'PROCESSING' AND (i.data->>'held') = 'true')
		OR (i.state = 'PROCESSING' AND i.updated_at > now() - $3 * interval '1 second')
		OR ((i.invoice_id IS NULL OR i.state = 'PENDING') AND u.created_at > now() - $2 * interval '1 second')) AS in_flight
	FROM payment_link_uses u LEFT JOIN invoices i ON i.invoice_id = u.invoice_id
	WHERE u.link_id = $1::uuid`

// PaymentLinkUsage counts a link's completed and in-flight payments under the
// default holds.
func PaymentLinkUsage(ctx context.Context, q sqlx.QueryerContext, linkID string) (LinkUsage, error) {
	return PaymentLinkUsageWithin(ctx, q, linkID, DefaultLinkHolds)
}

// PaymentLinkUsageWithin counts a link's completed and in-flight payments under h.
func PaymentLinkUsageWithin(ctx context.Context, q sqlx.QueryerContext, linkID string, h LinkHolds) (LinkUsage, error) {
	var u LinkUsage
	err := sqlx.GetContext(ctx, q, &u, linkUsageQuery, linkID, h.Send.Seconds(), h.Accepted.Seconds())
	return u, err
}

// ReserveLinkUse records that a payment (commandID, invoiceID) starts through the
// link, under the link row's lock: check gets the locked link and its usage (under
// h) and
// refuses with an error (nothing is recorded). Concurrent reservations of one link
// queue on the lock and each counts the ones committed before it, so no more
// payments than the limit are ever in flight or complete together. A command id
// already recorded (a retried request) holds its use and is accepted as is.
func ReserveLinkUse(ctx context.Context, db *sqlx.DB, linkID, commandID, invoiceID string, h LinkHolds,
	check func(PaymentLink, LinkUsage) error) error {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	var l PaymentLink
	err = sqlx.GetContext(ctx, tx, &l, `SELECT `+paymentLinkColumns+` FROM payment_links WHERE link_id = $1::uuid FOR UPDATE`, linkID)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	var held bool
	if err := sqlx.GetContext(ctx, tx, &held, `SELECT EXISTS (SELECT 1 FROM payment_link_uses
		WHERE link_id = $1::uuid AND command_id = $2)`, linkID, commandID); err != nil {
		return err
	}
	if held {
		return nil
	}
	var u LinkUsage
	if err := sqlx.GetContext(ctx, tx, &u, linkUsageQuery, linkID, h.Send.Seconds(), h.Accepted.Seconds()); err != nil {
		return err
	}
	if err := check(l, u); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO payment_link_uses (link_id, command_id, invoice_id) VALUES ($1, $2, $3)`,
		linkID, commandID, invoiceID); err != nil {
		return fmt.Errorf("reserve link use: %w", err)
	}
	return tx.Commit()
}

// SettleLinkUse points a reservation at the invoice the engine answered with (a
// retried command answers with the invoice its first attempt opened).
func SettleLinkUse(ctx context.Context, ext sqlx.ExtContext, linkID, commandID, invoiceID string) error {
	_, err := ext.ExecContext(ctx, `UPDATE payment_link_uses SET invoice_id = $3
		WHERE link_id = $1::uuid AND command_id = $2 AND invoice_id <> $3`, linkID, commandID, invoiceID)
	return err
}

// ReleaseLinkUse drops a reservation whose payment the engine refused: no invoice
// will ever exist for it.
func ReleaseLinkUse(ctx context.Context, ext sqlx.ExtContext, linkID, commandID string) error {
	_, err := ext.ExecContext(ctx, `DELETE FROM payment_link_uses WHERE link_id = $1::uuid AND command_id = $2`, linkID, commandID)
	return err
}
