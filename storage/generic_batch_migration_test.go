package storage_test

import (
	"context"
	"errors"
	"testing"

	"paysvc/actors/aggregates/invoice"
	"paysvc/actors/aggregates/invoice/invoicestore"
	"paysvc/storage"
)

// A database migrated before 0024, holding invoices and a payment file written by
// the old paysvc_commit_batch, migrates to the generic batch commit: the old
// signature is gone, and batches update the rows it wrote, version-checked.
func TestMigration0024_ExistingDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := emptySchema(t)
	applyNumbered(t, db, 24)
	// Rows as the old function left them, through the old function itself.
	for _, q := range []string{
		`INSERT INTO merchants (merchant_id, name, environment) VALUES ('M1', 'Old', 'sandbox')`,
		`INSERT INTO partition_offsets (topic, partition, epoch, next_offset, owner) VALUES ('paysvc.commands.v1', 0, 1, 5, 'A')`,
		`SELECT paysvc_commit_batch('paysvc.commands.v1', 0, 1, 6, '2026-03-01T12:00:00Z',
			'{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}',
			'{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}',
			'{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}',
			'{}', '{}', '{}', '{}', '{}',
			'{}', '{}', '{}', '{}', '{}',
			'{I1}', '{M1}', '{PENDING}', '{ref}', '{""}', '{1}', '{0}',
			ARRAY['{"invoice_id":"I1","merchant_id":"M1","state":"PENDING","api_ref":"ref","version":1}'],
			'{2026-03-01T12:00:00Z}', '{2026-03-01T12:00:00Z}',
			'[{"file_id":"F1","merchant_id":"M1","tracking_id":"7d8f9e5a-2c1b-4e0a-9f3d-1a2b3c4d5e6f","status":"PREVIEW_AND_APPROVE",
			   "version":1,"prev":0,"data":{"file_id":"F1"},"created_at":"2026-03-01T12:00:00Z","updated_at":"2026-03-01T12:00:00Z"}]',
			'[]')`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	applied, err := storage.Migrate(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	// 0024 first; later migrations (0026 refunds...) follow it.
	if len(applied) == 0 || applied[0] != 24 {
		t.Fatalf("applied %v, want 24 first", applied)
	}
	// 0035 replaced the generic function by its text-bodied _v2, and 0039 made the
	// _v2 functions wrappers of _v3 (invoices as column arrays), and 0048 added
	// _v4 (_v3 with the outbox's traceparents): these four are left, whatever the
	// database went through.
	var names []string
	if err := db.SelectContext(ctx, &names, `SELECT proname FROM pg_proc WHERE proname LIKE 'paysvc\_commit\_batch%'
		AND pronamespace = current_schema()::regnamespace ORDER BY proname`); err != nil {
		t.Fatal(err)
	}
	if len(names) != 4 || names[0] != "paysvc_commit_batch_v2" || names[1] != "paysvc_commit_batches_v2" || names[2] != "paysvc_commit_batches_v3" ||
		names[3] != "paysvc_commit_batches_v4" {
		t.Fatalf("commit functions %v, want only paysvc_commit_batch_v2, paysvc_commit_batches_v2, _v3 and _v4", names)
	}

	b := batchBundle{ctx: ctx, db: db, epoch: 1}
	w := storage.NewInvoiceWrites()
	old := invoice.State{InvoiceID: "I1", MerchantID: "M1", State: invoice.StatePending, APIRef: "ref", Version: 1, CreatedAt: t0, UpdatedAt: t0}
	next := old
	next.State, next.Version = invoice.StateFailed, 2
	invoicestore.Touch(w, old, next)
	bt := aggBatch(b, 7, w)
	if err := storage.CommitBatch(ctx, db, bt); err != nil {
		t.Fatal(err)
	}
	got, err := invoicestore.Get(ctx, db, "M1", "I1")
	if err != nil || got.State != invoice.StateFailed || got.Version != 2 {
		t.Fatalf("I1 after the migration: %+v %v", got, err)
	}
	wantOffset(t, b, 7)
	// The file written before the migration is version-checked by paysvc_apply_payout.
	stale := rawRows{"payout", `{"files":[{"file_id":"F1","merchant_id":"M1","tracking_id":"7d8f9e5a-2c1b-4e0a-9f3d-1a2b3c4d5e6f",
		"status":"CANCELLED","version":3,"prev":2,"data":{},"created_at":"2026-03-01T12:00:00Z","updated_at":"2026-03-01T12:00:00Z"}],"txns":[]}`}
	if err := storage.CommitBatch(ctx, db, aggBatch(b, 8, stale)); !errors.Is(err, storage.ErrStaleSnapshot) {
		t.Fatalf("stale file after the migration: %v", err)
	}
}
