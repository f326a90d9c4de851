package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// getOne reads the single row query selects; no row is ErrNotFound, so a lookup
// of another merchant's row answers as one of a row that does not exist.
func getOne[T any](ctx context.Context, q sqlx.QueryerContext, query string, args ...any) (T, error) {
	var v T
	err := sqlx.GetContext(ctx, q, &v, query, args...)
	if errors.Is(err, sql.ErrNoRows) {
		return v, ErrNotFound
	}
	return v, err
}

// lookup is getOne with its other errors named by what.
func lookup[T any](ctx context.Context, q sqlx.QueryerContext, what, query string, args ...any) (T, error) {
	v, err := getOne[T](ctx, q, query, args...)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return v, fmt.Errorf("%s: %w", what, err)
	}
	return v, err
}

// selectAll reads every row query selects (none: a nil slice); what names the
// rows in an error.
func selectAll[T any](ctx context.Context, q sqlx.QueryerContext, what, query string, args ...any) ([]T, error) {
	var out []T
	if err := sqlx.SelectContext(ctx, q, &out, query, args...); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// offsetPage reads one page (limit rows from offset, in order) of the merchant's
// rows of table and how many rows the merchant has there in all; what names the
// rows in an error. table, columns and order are this package's constants, never
// input.
func offsetPage[T any](ctx context.Context, q sqlx.QueryerContext, what, table, columns, order, merchantID string, limit, offset int) ([]T, int, error) {
	var total int
	if err := sqlx.GetContext(ctx, q, &total, `SELECT count(*) FROM `+table+` WHERE merchant_id = $1`, merchantID); err != nil {
		return nil, 0, fmt.Errorf("count %s: %w", what, err)
	}
	out := []T{}
	if err := sqlx.SelectContext(ctx, q, &out, `SELECT `+columns+` FROM `+table+` WHERE merchant_id = $1
		ORDER BY `+order+` LIMIT $2 OFFSET $3`, merchantID, limit, offset); err != nil {
		return nil, 0, fmt.Errorf("list %s: %w", what, err)
	}
	return out, total, nil
}

// cutPage cuts rows read with a LIMIT of limit+1 to limit and reports whether
// there were more: the extra row is how a keyset page knows another follows
// without counting.
func cutPage[T any](rows []T, limit int) ([]T, bool) {
	if len(rows) > limit {
		return rows[:limit], true
	}
	return rows, false
}
