package storage_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"paysvc/actors/aggregates/refund"
	"paysvc/storage"
	"paysvc/storage/storagetest"
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
	books, err := storage.LoadRefundBooks(b.ctx, b.db, "M1", []string{"I1"})
	if err != nil {
		t.Fatal(err)
	}
	bk := books["I1"]
	if bk.Version != 2 || len(bk.Book.Refunds) != 1 || bk.Book.Refunds[0].Status != refund.StatusCompleted || bk.Book.Invoice.Value.String() != "10.00" {
		t.Fatalf("loaded book: %+v", bk)
	}
	if _, err := storage.GetRefund(b.ctx, b.db, "M2", 7); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("another merchant's refund: %v", err)
	}
	if other, _ := storage.LoadRefundBooks(b.ctx, b.db, "M2", []string{"I1"}); len(other) != 0 {
		t.Fatalf("another merchant loaded the book: %+v", other)
	}
}

// RailRefunds (the sandbox refund rail's read) sees only its environment's enabled
// merchants, what is due (untaken PENDING, DISPUTED and OVERDUE one delay after
// their change; taken PENDING at once), and reads fairly: at most perMerchant of
// one merchant, every merchant's oldest before anyone's second.
func TestRailRefunds_EnvironmentEnabledAndFair(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storagetest.New(t).DB
	mustExec(t, db, `INSERT INTO merchants (merchant_id, name, environment, enabled) VALUES
		('BIG', 'Big', 'sandbox', true), ('SMALL', 'Small', 'sandbox', true),
		('OFF', 'Disabled', 'sandbox', false), ('LIVE', 'Live', 'live', true)`)
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	old := now.Add(-time.Hour)
	id := int64(0)
	add := func(merchant, status string, updated time.Time, taken bool) int64 {
		t.Helper()
		id++
		book := fmt.Sprintf("%s-%d", merchant, id)
		mustExec(t, db, `INSERT INTO refund_books (invoice_id, merchant_id, version, data, created_at, updated_at)
			VALUES ($1, $2, 1, '{}', $3, $3)`, book, merchant, updated)
		data := map[string]any{"id": id, "merchant_id": merchant, "invoice_id": book, "status": status, "amount": "1.00",
			"created_at": updated, "updated_at": updated}
		if taken {
			data["taken_at"] = updated
		}
		raw, _ := json.Marshal(data)
		mustExec(t, db, `INSERT INTO refunds (id, merchant_id, invoice_id, status, data, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $6)`, id, merchant, book, status, raw, updated)
		return id
	}
	// BIG has 30 old PENDING refunds, the oldest of all; SMALL one, younger.
	var big []int64
	for i := range 30 {
		big = append(big, add("BIG", refund.StatusPending, old.Add(time.Duration(i)*time.Second), false))
	}
	small := add("SMALL", refund.StatusPending, old.Add(time.Minute), false)
	// Due whatever their age: taken PENDING. Due when old: DISPUTED, OVERDUE.
	taken := add("SMALL", refund.StatusPending, now, true)
	disputed := add("SMALL", refund.StatusDisputed, old.Add(2*time.Minute), true)
	overdue := add("SMALL", refund.StatusOverdue, old.Add(3*time.Minute), true)
	// Not due: recent untaken PENDING, recent OVERDUE, final ones.
	add("SMALL", refund.StatusPending, now, false)
	add("SMALL", refund.StatusOverdue, now, true)
	add("SMALL", refund.StatusCompleted, old, true)
	add("SMALL", refund.StatusCancelled, old, false)
	// Never: a disabled merchant's, a live merchant's.
	add("OFF", refund.StatusPending, old, false)
	add("LIVE", refund.StatusPending, old, false)
	add("LIVE", refund.StatusPending, old, true)

	ids := func(rs []refund.Refund) []int64 {
		out := make([]int64, len(rs))
		for i, r := range rs {
			out[i] = r.ID
		}
		return out
	}
	got, err := storage.RailRefunds(ctx, db, "sandbox", now.Add(-time.Second), 20, 500)
	if err != nil {
		t.Fatal(err)
	}
	perMerchant := map[string]int{}
	for _, r := range got {
		perMerchant[r.MerchantID]++
	}
	if perMerchant["BIG"] != 20 || perMerchant["SMALL"] != 4 || len(perMerchant) != 2 {
		t.Fatalf("due per merchant %v, want BIG 20 (capped), SMALL 4; ids %v", perMerchant, ids(got))
	}
	// Round robin: each merchant's oldest first, then each one's second...
	want := []int64{big[0], small, big[1], disputed}
	if fmt.Sprint(ids(got)[:4]) != fmt.Sprint(want) {
		t.Fatalf("first due %v, want %v", ids(got)[:4], want)
	}
	small2, _ := storage.RailRefunds(ctx, db, "sandbox", now.Add(-time.Second), 20, 2)
	if fmt.Sprint(ids(small2)) != fmt.Sprint([]int64{big[0], small}) {
		t.Fatalf("a scan of 2 read %v: the big merchant starves the small one", ids(small2))
	}
	seen := map[int64]bool{}
	for _, id := range ids(got) {
		seen[id] = true
	}
	if !seen[taken] || !seen[overdue] {
		t.Fatalf("taken %d or old OVERDUE %d missing from %v", taken, overdue, ids(got))
	}
	for _, env := range []string{"", "production"} {
		if rs, err := storage.RailRefunds(ctx, db, env, now, 20, 500); err != nil || len(rs) != 0 {
			t.Fatalf("environment %q read %v (%v)", env, ids(rs), err)
		}
	}
	live, err := storage.RailRefunds(ctx, db, "live", now.Add(-time.Second), 20, 500)
	if err != nil || len(live) != 2 {
		t.Fatalf("live read %v (%v): only the live merchant's 2", ids(live), err)
	}
}
