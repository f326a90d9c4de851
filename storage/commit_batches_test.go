package storage_test

import (
	"errors"
	"fmt"
	"testing"

	"paysvc/actors/aggregates/invoice"
	"paysvc/actors/aggregates/invoice/invoicestore"
	"paysvc/actors/aggregates/payout/payoutstore"
	"paysvc/storage"
)

// secondPartition claims partition 1 for "A" and returns a batch of M2 on it:
// wallet W9 opened with a deposit, at offsets 0..1.
func secondPartition(t *testing.T, b batchBundle) storage.Batch {
	t.Helper()
	epoch, _, err := storage.ClaimPartition(b.ctx, b.db, testTopic, 1, "A")
	if err != nil {
		t.Fatal(err)
	}
	return storage.Batch{
		Topic: testTopic, Partition: 1, Epoch: epoch, NextOffset: 2, At: t0,
		Wallets: []storage.WalletWrite{{Row: state("W9", "M2", "40.00", 2, t0)}},
		Entries: depositEntries("C9b", "TXN9", "W9", "M2", "40.00", "40.00"),
		Processed: []storage.Processed{
			{CommandID: "C9a", MerchantID: "M2", Type: "wallet.create", Offset: 0, Reply: []byte(`{"command_id":"C9a"}`)},
			{CommandID: "C9b", MerchantID: "M2", Type: "wallet.deposit", Offset: 1, Reply: []byte(`{"command_id":"C9b"}`)},
		},
	}
}

// Two partitions' batches in one transaction: both offsets advance, every row is
// written, and each processed command is recorded under its own partition.
func TestCommitBatchesTwoPartitions(t *testing.T) {
	t.Parallel()
	b := setupBatch(t)
	second := secondPartition(t, b)
	if err := storage.CommitBatches(b.ctx, b.db, []storage.Batch{firstBatch(b), second}); err != nil {
		t.Fatal(err)
	}
	wantOffset(t, b, 3)
	if off, err := storage.PartitionOffset(b.ctx, b.db, testTopic, 1); err != nil || off != 2 {
		t.Fatalf("partition 1 offset = %d, %v; want 2", off, err)
	}
	if got := counts(t, b.db); got != (tableCounts{wallets: 3, entries: 4, processed: 5, outbox: 1}) {
		t.Fatalf("rows %+v", got)
	}
	var parts []int
	if err := b.db.SelectContext(b.ctx, &parts, `SELECT kafka_partition FROM processed_commands ORDER BY command_id`); err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 0, 0, 1, 1}; len(parts) != len(want) || parts[0] != 0 || parts[2] != 0 || parts[3] != 1 || parts[4] != 1 {
		t.Fatalf("partitions of C1 C2 C3 C9a C9b = %v, want %v", parts, want)
	}
	report, err := storage.CheckLedger(b.ctx, b.db)
	if err != nil || !report.OK {
		t.Fatalf("ledger check: %+v, %v", report, err)
	}
}

// One fenced partition fails the whole transaction: nothing of either batch is
// written (the engine then commits them one by one, and only the fenced one fails).
func TestCommitBatchesFencedWritesNothing(t *testing.T) {
	t.Parallel()
	b := setupBatch(t)
	second := secondPartition(t, b)
	if _, _, err := storage.ClaimPartition(b.ctx, b.db, testTopic, 1, "B"); err != nil { // B takes partition 1
		t.Fatal(err)
	}
	err := storage.CommitBatches(b.ctx, b.db, []storage.Batch{firstBatch(b), second})
	if !errors.Is(err, storage.ErrFenced) {
		t.Fatalf("err = %v, want ErrFenced", err)
	}
	wantOffset(t, b, 0)
	if got := counts(t, b.db); got != (tableCounts{}) {
		t.Fatalf("rows after a fenced combined commit: %+v", got)
	}
	// Alone, the partition still owned commits.
	if err := storage.CommitBatch(b.ctx, b.db, firstBatch(b)); err != nil {
		t.Fatal(err)
	}
	wantOffset(t, b, 3)
}

// Batches of one commit must share the time their rows take.
func TestCommitBatchesRefusesTwoTimes(t *testing.T) {
	t.Parallel()
	b := setupBatch(t)
	second := secondPartition(t, b)
	second.At = second.At.Add(1)
	if err := storage.CommitBatches(b.ctx, b.db, []storage.Batch{firstBatch(b), second}); err == nil {
		t.Fatal("two times in one commit accepted")
	}
	if got := counts(t, b.db); got != (tableCounts{}) {
		t.Fatalf("rows %+v", got)
	}
}

// The invoices of several partitions' batches go in one set of column arrays
// (migration 0039): every batch's invoices are written, the other kinds keep their
// own calls, and a stale invoice in any one batch still refuses the whole commit.
func TestCommitBatchesJoinInvoiceRows(t *testing.T) {
	t.Parallel()
	b := setupBatch(t)
	epoch1, _, err := storage.ClaimPartition(b.ctx, b.db, testTopic, 1, "A")
	if err != nil {
		t.Fatal(err)
	}
	on := func(part int32, epoch, next int64, aggs ...storage.AggregateRows) storage.Batch {
		bt := aggBatch(b, next, aggs...)
		bt.Partition, bt.Epoch = part, epoch
		bt.Processed[0].CommandID = fmt.Sprintf("P%d-%d", part, next)
		return bt
	}
	w0, w1 := storage.NewInvoiceWrites(), storage.NewInvoiceWrites()
	invoicestore.Touch(w0, invoice.State{}, inv("I0", 1, invoice.StatePending, t0))
	invoicestore.Touch(w1, invoice.State{}, inv("I1", 1, invoice.StatePending, t0))
	invoicestore.Touch(w1, invoice.State{}, inv("I2", 1, invoice.StatePending, t0))
	if err := storage.CommitBatches(b.ctx, b.db, []storage.Batch{on(0, b.epoch, 1, w0), on(1, epoch1, 1, payoutstore.NewWrites(), w1)}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"I0", "I1", "I2"} {
		if got, err := invoicestore.Get(b.ctx, b.db, "M1", id); err != nil || got.Version != 1 {
			t.Fatalf("%s = %+v, %v", id, got, err)
		}
	}

	// Partition 0 moves I0 on; partition 1's I2 is not at version 2.
	w0, w1 = storage.NewInvoiceWrites(), storage.NewInvoiceWrites()
	invoicestore.Touch(w0, inv("I0", 1, invoice.StatePending, t0), inv("I0", 2, invoice.StateComplete, t0))
	invoicestore.Touch(w1, inv("I2", 2, invoice.StatePending, t0), inv("I2", 3, invoice.StateFailed, t0))
	err = storage.CommitBatches(b.ctx, b.db, []storage.Batch{on(0, b.epoch, 2, w0), on(1, epoch1, 2, w1)})
	if !errors.Is(err, storage.ErrStaleSnapshot) {
		t.Fatalf("err = %v, want ErrStaleSnapshot", err)
	}
	wantOffset(t, b, 1)
	if got, _ := invoicestore.Get(b.ctx, b.db, "M1", "I0"); got.Version != 1 {
		t.Fatalf("I0 after a refused commit: %+v", got)
	}
	// Right versions: both commit, in one call.
	w1 = storage.NewInvoiceWrites()
	invoicestore.Touch(w1, inv("I2", 1, invoice.StatePending, t0), inv("I2", 2, invoice.StateFailed, t0))
	if err := storage.CommitBatches(b.ctx, b.db, []storage.Batch{on(0, b.epoch, 2, w0), on(1, epoch1, 2, w1)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := invoicestore.Get(b.ctx, b.db, "M1", "I0"); got.Version != 2 || got.State != invoice.StateComplete {
		t.Fatalf("I0 = %+v", got)
	}
	if got, _ := invoicestore.Get(b.ctx, b.db, "M1", "I2"); got.Version != 2 || got.State != invoice.StateFailed {
		t.Fatalf("I2 = %+v", got)
	}
}
