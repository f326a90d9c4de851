package storage

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// MerchantSummary is a merchant as an operator lists it (paysvc merchant list).
type MerchantSummary struct {
	MerchantID  string    `db:"merchant_id" json:"merchant_id"`
	Name        string    `db:"name" json:"name"`
	Environment string    `db:"environment" json:"environment"`
	Enabled     bool      `db:"enabled" json:"enabled"`
	Email       *string   `db:"email" json:"email"`
	CreatedAt   time.Time `db:"created_at" json:"created_at"`
}

// ListMerchants is every merchant, oldest first; environment "" is both.
func ListMerchants(ctx context.Context, db sqlx.QueryerContext, environment string) ([]MerchantSummary, error) {
	return selectAll[MerchantSummary](ctx, db, "list merchants", `SELECT merchant_id, name, environment, enabled, email, created_at
		FROM merchants WHERE $1 = '' OR environment = $1 ORDER BY created_at, merchant_id`, environment)
}

// KeySummary is an API key as an operator lists it: what it may do and whether
// it still works, never the key or its hash.
type KeySummary struct {
	KeyID        string         `db:"key_id" json:"key_id"`
	Kind         string         `db:"kind" json:"kind"`
	Environment  string         `db:"environment" json:"environment"`
	Unrestricted bool           `db:"unrestricted" json:"unrestricted"`
	Permissions  pq.StringArray `db:"permissions" json:"permissions"`
	CreatedAt    time.Time      `db:"created_at" json:"created_at"`
	RevokedAt    *time.Time     `db:"revoked_at" json:"revoked_at"`
}

// ListKeys is the merchant's keys, revoked ones included, oldest first.
func ListKeys(ctx context.Context, db sqlx.QueryerContext, merchantID string) ([]KeySummary, error) {
	return selectAll[KeySummary](ctx, db, "list keys", `SELECT key_id, kind, environment, unrestricted, permissions, created_at, revoked_at
		FROM api_keys WHERE merchant_id = $1 ORDER BY created_at, key_id`, merchantID)
}

// MerchantExists reports whether the merchant is known.
func MerchantExists(ctx context.Context, db sqlx.QueryerContext, merchantID string) (bool, error) {
	var ok bool
	err := sqlx.GetContext(ctx, db, &ok, `SELECT EXISTS (SELECT 1 FROM merchants WHERE merchant_id = $1)`, merchantID)
	return ok, err
}
