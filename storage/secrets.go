package storage

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// ServiceSecret returns the named secret, creating 32 random bytes the first time.
// Concurrent first calls agree: the first insert wins and everyone reads it.
func ServiceSecret(ctx context.Context, db *sqlx.DB, name string) ([]byte, error) {
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("service secret: %w", err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO service_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`, name, fresh); err != nil {
		return nil, fmt.Errorf("service secret: %w", err)
	}
	var v []byte
	if err := sqlx.GetContext(ctx, db, &v, `SELECT value FROM service_secrets WHERE name = $1`, name); err != nil {
		return nil, fmt.Errorf("service secret: %w", err)
	}
	return v, nil
}
