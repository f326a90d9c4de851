package api

import (
	"context"

	"github.com/jmoiron/sqlx"

	"paysvc/storage"
)

// listed reads one page of a list and the list's total in one snapshot
// (storage.ReadSnapshot): read in two statements on their own, a row written
// between them was counted and not shown, or shown and not counted, and a client
// paging by the count skipped or repeated rows.
func listed[T any](ctx context.Context, db *sqlx.DB, list func(q sqlx.QueryerContext) ([]T, int, error)) ([]T, int, error) {
	var rows []T
	var total int
	err := storage.ReadSnapshot(ctx, db, func(tx *sqlx.Tx) error {
		var err error
		rows, total, err = list(tx)
		return err
	})
	return rows, total, err
}
