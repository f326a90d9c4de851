package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jmoiron/sqlx"

	"paysvc/actors/values/money"
)

// Checkout is a checkout session; Paid is derived from its invoices.
type Checkout struct {
	CheckoutID   string        `db:"checkout_id"`
	MerchantID   string        `db:"merchant_id"`
	Amount       *money.Amount `db:"amount"`
	Currency     string        `db:"currency"`
	Email        *string       `db:"email"`
	APIRef       *string       `db:"api_ref"`
	CardTarrif   string        `db:"card_tarrif"`
	MobileTarrif string        `db:"mobile_tarrif"`
	// WalletID receives every payment through the session (nil: the merchant's KES
	// settlement wallet); RedirectURL is where the hosted page sends the payer after
	// a successful payment.
	WalletID    *string `db:"wallet_id"`
	RedirectURL *string `db:"redirect_url"`
	// The customer details given at creation, carried by every payment through the
	// session (a payment's own values win only where the session has none).
	PhoneNumber *string   `db:"phone_number"`
	FirstName   *string   `db:"first_name"`
	LastName    *string   `db:"last_name"`
	Country     *string   `db:"country"`
	Zipcode     *string   `db:"zipcode"`
	Address     *string   `db:"address"`
	City        *string   `db:"city"`
	State       *string   `db:"state"`
	Comment     *string   `db:"comment"`
	CreatedAt   time.Time `db:"created_at"`
	UpdatedAt   time.Time `db:"updated_at"`
	Paid        bool      `db:"paid"`

	// PaymentLinkID is the payment link the session was opened for (nil: none).
	PaymentLinkID *string `db:"payment_link_id"`
}

const checkoutColumns = `c.checkout_id, c.merchant_id, c.amount, c.currency, c.email, c.api_ref, c.card_tarrif,
	c.mobile_tarrif, c.wallet_id, c.redirect_url, c.phone_number, c.first_name, c.last_name, c.country, c.zipcode,
	c.address, c.city, c.state, c.comment, c.payment_link_id, c.created_at, c.updated_at,
	EXISTS (SELECT 1 FROM invoices i WHERE i.data ? 'checkout_id' AND i.data ->> 'checkout_id' = c.checkout_id::text
		AND i.state = 'COMPLETE') AS paid`

// InsertCheckout stores a new session.
func InsertCheckout(ctx context.Context, ext sqlx.ExtContext, c Checkout) error {
	_, err := ext.ExecContext(ctx, `INSERT INTO checkouts (checkout_id, merchant_id, amount, currency, email, api_ref,
		card_tarrif, mobile_tarrif, wallet_id, redirect_url, phone_number, first_name, last_name, country, zipcode,
		address, city, state, comment, created_at, updated_at, payment_link_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $20, $21)`,
		c.CheckoutID, c.MerchantID, c.Amount, c.Currency, c.Email, c.APIRef, c.CardTarrif, c.MobileTarrif,
		c.WalletID, c.RedirectURL, c.PhoneNumber, c.FirstName, c.LastName, c.Country, c.Zipcode,
		c.Address, c.City, c.State, c.Comment, c.CreatedAt, c.PaymentLinkID)
	if err != nil {
		return fmt.Errorf("insert checkout: %w", err)
	}
	return nil
}

// checkoutIDPattern is the one spelling of a checkout id that the service hands
// out (ids.UUID: lower-case, hyphenated). Anything else names no session, so it is
// refused before the database: the uuid parameter below could not even be cast
// from it, and the lookup by the column's own type is what lets the primary key's
// index answer (a cast of the column to text would scan the table).
var checkoutIDPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// ValidCheckoutID reports whether id is spelled as the service spells checkout ids.
func ValidCheckoutID(id string) bool { return checkoutIDPattern.MatchString(id) }

const (
	getCheckoutQuery  = `SELECT ` + checkoutColumns + ` FROM checkouts c WHERE c.checkout_id = $2::uuid AND c.merchant_id = $1`
	checkoutByIDQuery = `SELECT ` + checkoutColumns + ` FROM checkouts c WHERE c.checkout_id = $1::uuid`
)

// GetCheckout reads one of the merchant's sessions; another merchant's, or an id
// that is not a checkout id at all, is ErrNotFound.
func GetCheckout(ctx context.Context, q sqlx.QueryerContext, merchantID, checkoutID string) (Checkout, error) {
	if !ValidCheckoutID(checkoutID) {
		return Checkout{}, ErrNotFound
	}
	return getOne[Checkout](ctx, q, getCheckoutQuery, merchantID, checkoutID)
}

// CheckoutByID reads a session for its hosted page (the id is the capability); a
// malformed id is ErrNotFound without a query.
func CheckoutByID(ctx context.Context, q sqlx.QueryerContext, checkoutID string) (Checkout, error) {
	if !ValidCheckoutID(checkoutID) {
		return Checkout{}, ErrNotFound
	}
	return getOne[Checkout](ctx, q, checkoutByIDQuery, checkoutID)
}

// CheckoutByAPIRef returns the merchant's latest session with that api_ref.
func CheckoutByAPIRef(ctx context.Context, q sqlx.QueryerContext, merchantID, apiRef string) (Checkout, error) {
	return getOne[Checkout](ctx, q, `SELECT `+checkoutColumns+` FROM checkouts c
		WHERE c.merchant_id = $1 AND c.api_ref = $2 ORDER BY c.created_at DESC LIMIT 1`, merchantID, apiRef)
}

// PreviousPayer returns the phone number of the merchant's latest completed invoice
// paid with that email (to pre-fill the checkout page), or "".
func PreviousPayer(ctx context.Context, q sqlx.QueryerContext, merchantID, email string) (string, error) {
	var phone string
	err := sqlx.GetContext(ctx, q, &phone, `SELECT data ->> 'account' FROM invoices
		WHERE merchant_id = $1 AND data ? 'email' AND data ->> 'email' = $2 AND state = 'COMPLETE'
		ORDER BY created_at DESC LIMIT 1`, merchantID, email)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return phone, err
}
