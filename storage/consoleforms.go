package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// InsertKeyOnce stores the key k made by the console form whose one-time token
// hashes to formHash, unless that form was submitted before: the token's use and
// the key are one transaction, so either both exist or neither. created is false
// when the form had been used, and keyID is then the key that first submit made
// (of this merchant only); nothing is written. Two submits at once serialise on
// the token's primary key: the second waits for the first and then finds its row.
func InsertKeyOnce(ctx context.Context, db *sqlx.DB, formHash []byte, k APIKey, keyHash []byte) (keyID string, created bool, err error) {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return "", false, fmt.Errorf("insert key once: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, `INSERT INTO console_form_uses (token_hash, merchant_id, result) VALUES ($1, $2, $3)
		ON CONFLICT (token_hash) DO NOTHING`, formHash, k.MerchantID, k.KeyID)
	if err != nil {
		return "", false, fmt.Errorf("record console form use: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return "", false, err
	}
	if n == 0 {
		err := sqlx.GetContext(ctx, tx, &keyID, `SELECT result FROM console_form_uses WHERE token_hash = $1 AND merchant_id = $2`,
			formHash, k.MerchantID)
		if errors.Is(err, sql.ErrNoRows) {
			// Another merchant's token: impossible for a token bound to a session,
			// and never an answer about the other merchant.
			return "", false, nil
		}
		if err != nil {
			return "", false, fmt.Errorf("read console form use: %w", err)
		}
		return keyID, false, nil
	}
	if err := InsertAPIKey(ctx, tx, k, keyHash); err != nil {
		return "", false, err
	}
	if err := tx.Commit(); err != nil {
		return "", false, fmt.Errorf("insert key once: %w", err)
	}
	return k.KeyID, true, nil
}

// DeleteOldConsoleFormUses removes form uses older than maxAge, the sessions'
// absolute lifetime: their tokens were bound to sessions that no longer exist.
func DeleteOldConsoleFormUses(ctx context.Context, ext sqlx.ExecerContext, maxAge time.Duration) error {
	if _, err := ext.ExecContext(ctx, `DELETE FROM console_form_uses WHERE used_at < now() - make_interval(secs => $1)`,
		maxAge.Seconds()); err != nil {
		return fmt.Errorf("delete old console form uses: %w", err)
	}
	return nil
}
