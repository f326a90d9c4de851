package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// IdempotencyRecord is the stored state of one Idempotency-Key.
type IdempotencyRecord struct {
	RequestHash    []byte     `db:"request_hash"`
	CommandID      string     `db:"command_id"`
	LockedUntil    *time.Time `db:"locked_until"`
	ResponseStatus *int       `db:"response_status"`
	ResponseBody   []byte     `db:"response_body"`
	CreatedAt      time.Time  `db:"created_at"`
	Expired        bool       `db:"expired"`
}

// IdempotencyOutcome says what the caller should do with a request.
type IdempotencyOutcome int

const (
	// IdemProceed: this request holds the key's lock and must run.
	IdemProceed IdempotencyOutcome = iota
	// IdemReplay: a response is stored; send it again.
	IdemReplay
	// IdemInFlight: another request with the key is running.
	IdemInFlight
	// IdemMismatch: the key was used with a different request.
	IdemMismatch
)

// BeginIdempotent claims an Idempotency-Key for a request. A key whose holder died
// (lock expired without a stored response) is taken over with the same command id,
// so the engine's dedupe makes the retry apply at most once. Records older than
// retain are forgotten and the key starts afresh.
func BeginIdempotent(ctx context.Context, db *sqlx.DB, merchantID, key string, hash []byte, commandID string, lock, retain time.Duration) (IdempotencyOutcome, IdempotencyRecord, error) {
	for attempt := 0; attempt < 3; attempt++ {
		var rec IdempotencyRecord
		err := sqlx.GetContext(ctx, db, &rec, `INSERT INTO idempotency_keys (merchant_id, idem_key, request_hash, command_id, locked_until)
			VALUES ($1, $2, $3, $4, now() + $5 * interval '1 millisecond')
			ON CONFLICT (merchant_id, idem_key) DO NOTHING
			RETURNING request_hash, command_id, locked_until, response_status, response_body, created_at, false AS expired`,
			merchantID, key, hash, commandID, lock.Milliseconds())
		if err == nil {
			return IdemProceed, rec, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return 0, rec, fmt.Errorf("idempotency insert: %w", err)
		}
		// Expiry is judged by the database clock, the same clock that wrote created_at.
		err = sqlx.GetContext(ctx, db, &rec, `SELECT request_hash, command_id, locked_until, response_status, response_body, created_at,
			created_at < now() - $3 * interval '1 millisecond' AS expired
			FROM idempotency_keys WHERE merchant_id = $1 AND idem_key = $2`, merchantID, key, retain.Milliseconds())
		if errors.Is(err, sql.ErrNoRows) {
			continue // deleted meanwhile: insert again
		}
		if err != nil {
			return 0, rec, fmt.Errorf("idempotency read: %w", err)
		}
		if rec.Expired {
			if _, err := db.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE merchant_id = $1 AND idem_key = $2 AND created_at = $3`,
				merchantID, key, rec.CreatedAt); err != nil {
				return 0, rec, fmt.Errorf("idempotency expire: %w", err)
			}
			continue
		}
		if string(rec.RequestHash) != string(hash) {
			return IdemMismatch, rec, nil
		}
		if rec.ResponseStatus != nil {
			return IdemReplay, rec, nil
		}
		res, err := db.ExecContext(ctx, `UPDATE idempotency_keys SET locked_until = now() + $3 * interval '1 millisecond'
			WHERE merchant_id = $1 AND idem_key = $2 AND response_status IS NULL AND (locked_until IS NULL OR locked_until < now())`,
			merchantID, key, lock.Milliseconds())
		if err != nil {
			return 0, rec, fmt.Errorf("idempotency take over: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return IdemProceed, rec, nil
		}
		return IdemInFlight, rec, nil
	}
	return IdemInFlight, IdempotencyRecord{}, nil
}

// IdempotencyKeyHeld reports whether the merchant has a record under exactly key
// younger than retain. The API stores keys scoped by principal kind ("kind\nkey");
// an unscoped one is a record from before scoping, honoured until it expires.
func IdempotencyKeyHeld(ctx context.Context, db *sqlx.DB, merchantID, key string, retain time.Duration) (bool, error) {
	var held bool
	err := sqlx.GetContext(ctx, db, &held, `SELECT EXISTS (SELECT 1 FROM idempotency_keys
		WHERE merchant_id = $1 AND idem_key = $2 AND created_at >= now() - $3 * interval '1 millisecond')`,
		merchantID, key, retain.Milliseconds())
	if err != nil {
		return false, fmt.Errorf("idempotency lookup: %w", err)
	}
	return held, nil
}

// CompleteIdempotent stores the response of the request holding the key.
func CompleteIdempotent(ctx context.Context, db *sqlx.DB, merchantID, key string, status int, body []byte) error {
	_, err := db.ExecContext(ctx, `UPDATE idempotency_keys SET response_status = $3, response_body = $4,
		completed_at = now(), locked_until = NULL WHERE merchant_id = $1 AND idem_key = $2`, merchantID, key, status, body)
	if err != nil {
		return fmt.Errorf("idempotency complete: %w", err)
	}
	return nil
}

// ReleaseIdempotent frees the key without a stored response (the outcome is not
// known, e.g. the engine did not answer in time), so a retry may take it over.
func ReleaseIdempotent(ctx context.Context, db *sqlx.DB, merchantID, key string) error {
	_, err := db.ExecContext(ctx, `UPDATE idempotency_keys SET locked_until = NULL
		WHERE merchant_id = $1 AND idem_key = $2 AND response_status IS NULL`, merchantID, key)
	if err != nil {
		return fmt.Errorf("idempotency release: %w", err)
	}
	return nil
}

// PruneIdempotency deletes up to limit records older than retain.
func PruneIdempotency(ctx context.Context, ext sqlx.ExtContext, retain time.Duration, limit int) (int64, error) {
	res, err := ext.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE ctid IN (
			SELECT ctid FROM idempotency_keys WHERE created_at < now() - $1 * interval '1 millisecond' LIMIT $2)`,
		retain.Milliseconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("prune idempotency: %w", err)
	}
	return res.RowsAffected()
}
