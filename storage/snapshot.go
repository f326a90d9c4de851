package storage

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// ReadSnapshot runs read in one read-only REPEATABLE READ transaction, so every
// statement in it sees the same snapshot: a list's count and its page, read in two
// statements, then agree (outside one, a row written between the two was seen by
// one and not the other: "count": 0 beside a result).
func ReadSnapshot(ctx context.Context, db *sqlx.DB, read func(tx *sqlx.Tx) error) error {
	tx, err := db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return fmt.Errorf("begin snapshot: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only: nothing to undo
	if err := read(tx); err != nil {
		return err
	}
	return tx.Commit()
}
