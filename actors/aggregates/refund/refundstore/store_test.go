package refundstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"paysvc/actors/aggregates/refund"
	"paysvc/actors/aggregates/refund/refundstore"
	"paysvc/storage/storagetest"
)

func mustExec(t *testing.T, db *sqlx.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// RailDue (the sandbox refund rail's read) sees only its environment's enabled
// merchants, what is due (untaken PENDING, DISPUTED and OVERDUE one delay after
// their change; taken PENDING at once), and reads fairly: at most perMerchant of
// one merchant, every merchant's oldest before anyone's second.
func TestRailDue_EnvironmentEnabledAndFair(t *testing.T) {
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
	got, err := refundstore.RailDue(ctx, db, "sandbox", now.Add(-time.Second), 20, 500)
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
	small2, _ := refundstore.RailDue(ctx, db, "sandbox", now.Add(-time.Second), 20, 2)
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
		if rs, err := refundstore.RailDue(ctx, db, env, now, 20, 500); err != nil || len(rs) != 0 {
			t.Fatalf("environment %q read %v (%v)", env, ids(rs), err)
		}
	}
	live, err := refundstore.RailDue(ctx, db, "live", now.Add(-time.Second), 20, 500)
	if err != nil || len(live) != 2 {
		t.Fatalf("live read %v (%v): only the live merchant's 2", ids(live), err)
	}
}
