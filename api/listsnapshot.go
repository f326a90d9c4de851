package api

import (
	"context"
	"net/http"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"

	"paysvc/api/edge"
	"paysvc/storage"
	"paysvc/topics/tracing"
)

// listed reads one page of a list and the list's total in one snapshot
// (storage.ReadSnapshot): read in two statements on their own, a row written
// between them was counted and not shown, or shown and not counted, and a client
// paging by the count skipped or repeated rows.
func listed[T any](ctx context.Context, db *sqlx.DB, list func(q sqlx.QueryerContext) ([]T, int, error)) ([]T, int, error) {
	var rows []T
	var total int
	ctx, span := tracing.DBSpan(ctx, "SELECT") // the page and its total, one snapshot
	err := storage.ReadSnapshot(ctx, db, func(tx *sqlx.Tx) error {
		var err error
		rows, total, err = list(tx)
		return err
	})
	tracing.EndDB(span, err)
	return rows, total, err
}

// listOwn answers the page the request asks for (pageOf) of the authenticated
// merchant's rows of one kind, with their total (listed), each row answered as
// render makes it.
func listOwn[T, J any](s *Server, c echo.Context,
	list func(ctx context.Context, q sqlx.QueryerContext, merchantID string, limit, offset int) ([]T, int, error),
	render func(T) J) error {
	pg, err := pageOf(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	rows, total, err := listed(ctx, s.db, func(q sqlx.QueryerContext) ([]T, int, error) {
		return list(ctx, q, edge.PrincipalOf(c).MerchantID, pg.size, pg.offset())
	})
	if err != nil {
		return err
	}
	out := make([]J, len(rows))
	for i, r := range rows {
		out[i] = render(r)
	}
	return c.JSON(http.StatusOK, pg.list(c, total, out))
}
