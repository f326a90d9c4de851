package storage

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// Merchant is a business using the API.
type Merchant struct {
	MerchantID  string    `db:"merchant_id"`
	Name        string    `db:"name"`
	Environment string    `db:"environment"`
	Enabled     bool      `db:"enabled"`
	CreatedAt   time.Time `db:"created_at"`
}

// APIKey is a key's stored record; the key itself is never stored, only its hash.
type APIKey struct {
	KeyID       string         `db:"key_id"`
	MerchantID  string         `db:"merchant_id"`
	Kind        string         `db:"kind"`
	Environment string         `db:"environment"`
	Permissions pq.StringArray `db:"permissions"`
	// Unrestricted grants every permission (a merchant's main secret key);
	// without it the key may do only what Permissions lists, and nothing when
	// the list is empty (migration 0061).
	Unrestricted    bool       `db:"unrestricted"`
	CreatedAt       time.Time  `db:"created_at"`
	RevokedAt       *time.Time `db:"revoked_at"`
	MerchantEnabled bool       `db:"merchant_enabled"`
	// MerchantEnvironment is the key's merchant's environment: a key is honoured
	// only where both agree (api's authenticator).
	MerchantEnvironment string `db:"merchant_environment"`
}

// InsertMerchant stores a new merchant.
func InsertMerchant(ctx context.Context, ext sqlx.ExtContext, m Merchant) error {
	_, err := sqlx.NamedExecContext(ctx, ext, `INSERT INTO merchants (merchant_id, name, environment, enabled)
		VALUES (:merchant_id, :name, :environment, :enabled)`, m)
	if err != nil {
		return fmt.Errorf("insert merchant: %w", err)
	}
	return nil
}

// GetMerchant reads one merchant.
func GetMerchant(ctx context.Context, q sqlx.QueryerContext, merchantID string) (Merchant, error) {
	return getOne[Merchant](ctx, q, `SELECT merchant_id, name, environment, enabled, created_at FROM merchants WHERE merchant_id = $1`, merchantID)
}

// GetMerchants reads the merchants among ids that exist, by id.
func GetMerchants(ctx context.Context, q sqlx.QueryerContext, ids []string) (map[string]Merchant, error) {
	var ms []Merchant
	if err := sqlx.SelectContext(ctx, q, &ms, `SELECT merchant_id, name, environment, enabled, created_at FROM merchants
		WHERE merchant_id = ANY($1)`, pq.StringArray(ids)); err != nil {
		return nil, fmt.Errorf("get merchants: %w", err)
	}
	out := make(map[string]Merchant, len(ms))
	for _, m := range ms {
		out[m.MerchantID] = m
	}
	return out, nil
}

// SetMerchantEnabled enables or disables a merchant; it reports whether it exists.
func SetMerchantEnabled(ctx context.Context, ext sqlx.ExtContext, merchantID string, enabled bool) (bool, error) {
	res, err := ext.ExecContext(ctx, `UPDATE merchants SET enabled = $2 WHERE merchant_id = $1`, merchantID, enabled)
	if err != nil {
		return false, fmt.Errorf("set merchant enabled: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// InsertAPIKey stores a key's hash and metadata.
func InsertAPIKey(ctx context.Context, ext sqlx.ExtContext, k APIKey, hash []byte) error {
	perms := k.Permissions
	if perms == nil {
		perms = pq.StringArray{} // the column is NOT NULL: no list is an empty one
	}
	_, err := ext.ExecContext(ctx, `INSERT INTO api_keys (key_id, merchant_id, kind, environment, key_hash, permissions, unrestricted)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, k.KeyID, k.MerchantID, k.Kind, k.Environment, hash, perms, k.Unrestricted)
	if err != nil {
		return fmt.Errorf("insert api key: %w", err)
	}
	return nil
}

// KeyByHash finds a key by the hash of its full text, with its merchant's status.
func KeyByHash(ctx context.Context, q sqlx.QueryerContext, hash []byte) (APIKey, error) {
	return lookup[APIKey](ctx, q, "key by hash", `SELECT k.key_id, k.merchant_id, k.kind, k.environment, k.permissions, k.unrestricted,
		k.created_at, k.revoked_at, m.enabled AS merchant_enabled,
		m.environment AS merchant_environment
		FROM api_keys k JOIN merchants m USING (merchant_id) WHERE k.key_hash = $1`, hash)
}

// RevokeKey revokes the live key whose id starts with prefix, or whose full text is
// prefix (checked against the stored hash); an ambiguous prefix (matching more than
// one live key) revokes nothing and is an error.
func RevokeKey(ctx context.Context, db *sqlx.DB, prefix string) (string, error) {
	full := sha256.Sum256([]byte(prefix))
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	var ids []string
	if err := tx.SelectContext(ctx, &ids, `SELECT key_id FROM api_keys
		WHERE (starts_with(key_id, $1) OR key_hash = $2) AND revoked_at IS NULL FOR UPDATE`, prefix, full[:]); err != nil {
		return "", fmt.Errorf("find key: %w", err)
	}
	switch len(ids) {
	case 0:
		return "", ErrNotFound
	case 1:
	default:
		return "", fmt.Errorf("prefix %q matches %d keys; give more of the key id", prefix, len(ids))
	}
	if _, err := tx.ExecContext(ctx, `UPDATE api_keys SET revoked_at = now() WHERE key_id = $1`, ids[0]); err != nil {
		return "", fmt.Errorf("revoke key: %w", err)
	}
	return ids[0], tx.Commit()
}

// SetMerchantEmail sets (or, with "", clears) the address that receives the
// merchant's operational mail. It reports whether the merchant exists.
func SetMerchantEmail(ctx context.Context, ext sqlx.ExecerContext, merchantID, email string) (bool, error) {
	res, err := ext.ExecContext(ctx, `UPDATE merchants SET email = NULLIF($2, '') WHERE merchant_id = $1`, merchantID, email)
	if err != nil {
		return false, fmt.Errorf("set merchant email: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// MerchantEmail returns the merchant's operational address ("" when none is set).
func MerchantEmail(ctx context.Context, q sqlx.QueryerContext, merchantID string) (string, error) {
	var email sql.NullString
	err := sqlx.GetContext(ctx, q, &email, `SELECT email FROM merchants WHERE merchant_id = $1`, merchantID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("merchant email: %w", err)
	}
	return email.String, nil
}
