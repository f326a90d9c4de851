package storage

import (
	"context"

	"github.com/jmoiron/sqlx"
)

// RefundKind is the refunds' kind in the batch commit (paysvc_apply_refund,
// migration 0026). The engine writes its rows generically (registered aggregate).
const RefundKind = "refund"

// NextRefundID allocates a refund id (the spec's integer chargeback id).
func NextRefundID(ctx context.Context, q sqlx.QueryerContext) (int64, error) {
	var id int64
	err := sqlx.GetContext(ctx, q, &id, `SELECT nextval('refund_ids')`)
	return id, err
}
