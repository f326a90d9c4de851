package storage_test

import (
	"errors"
	"fmt"
	"testing"

	"paysvc/actors/aggregates/refund"
	"paysvc/actors/aggregates/refund/refundstore"
	"paysvc/storage"
)

// paysvc_apply_refund (storage/functions) with the engine's generic rows: a new book
// with its refund, a version-checked update that changes the refund, a stale one.
func TestCommitBatchRefundBooks(t *testing.T) {
	t.Parallel()
	b := setupBatch(t)
	row := func(prev, version int64, status string) string {
		return fmt.Sprintf(`[{"id":"I1","merchant_id":"M1","prev":%d,"version":%d,"state":{"invoice_id":"I1","merchant_id":"M1",
			"invoice":{"invoice_id":"I1","value":"10.00","currency":"KES","wallet_id":"W1"},
			"refunds":[{"id":7,"merchant_id":"M1","invoice_id":"I1","wallet_id":"W1","currency":"KES","amount":"4.00",
			"reason":"Other","status":%q,"created_at":"2026-03-01T12:00:00Z","updated_at":"2026-03-01T12:00:00Z"}]}}]`,
			prev, version, status)
	}
	if err := storage.CommitBatch(b.ctx, b.db, aggBatch(b, 1, rawRows{storage.RefundKind, row(0, 1, refund.StatusPending)})); err != nil {
		t.Fatal(err)
	}
	if err := storage.CommitBatch(b.ctx, b.db, aggBatch(b, 2, rawRows{storage.RefundKind, row(1, 2, refund.StatusCompleted)})); err != nil {
		t.Fatal(err)
	}
	err := storage.CommitBatch(b.ctx, b.db, aggBatch(b, 3, rawRows{storage.RefundKind, row(1, 2, refund.StatusCancelled)}))
	if !errors.Is(err, storage.ErrStaleSnapshot) {
		t.Fatalf("stale update: %v, want ErrStaleSnapshot", err)
	}
	books, err := refundstore.LoadBooks(b.ctx, b.db, "M1", []string{"I1"})
	if err != nil {
		t.Fatal(err)
	}
	bk := books["I1"]
	if bk.Version != 2 || len(bk.Book.Refunds) != 1 || bk.Book.Refunds[0].Status != refund.StatusCompleted || bk.Book.Invoice.Value.String() != "10.00" {
		t.Fatalf("loaded book: %+v", bk)
	}
	if _, err := refundstore.Get(b.ctx, b.db, "M2", 7); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("another merchant's refund: %v", err)
	}
	if other, _ := refundstore.LoadBooks(b.ctx, b.db, "M2", []string{"I1"}); len(other) != 0 {
		t.Fatalf("another merchant loaded the book: %+v", other)
	}
}
