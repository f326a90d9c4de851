package invoicekind

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"paysvc/actors/aggregates/invoice"
)

// A collection counts each state it reaches once its batch commits, and its
// final state's latency; a change that is no state change counts nothing.
func TestCountCollection(t *testing.T) {
	complete := func() float64 {
		return testutil.ToFloat64(collectionsTotal.WithLabelValues("xts", invoice.StateComplete))
	}
	before := complete()
	var at time.Time
	open := invoice.State{InvoiceID: "I", Provider: "XTS", State: invoice.StateProcessing, CreatedAt: at}
	done := open
	done.State, done.UpdatedAt = invoice.StateComplete, at.Add(1500_000_000) // 1.5 s
	var after []func()
	for _, f := range []func(){collectionCount(open, open), collectionCount(open, done)} {
		if f != nil {
			after = append(after, f)
		}
	}
	if complete() != before || len(after) != 1 {
		t.Fatalf("counted before its batch committed, or a non-change was booked: %v, %d hooks", complete()-before, len(after))
	}
	for _, f := range after {
		f()
	}
	if complete()-before != 1 {
		t.Errorf("COMPLETE moved by %v, want 1", complete()-before)
	}
	if n := testutil.CollectAndCount(collectionOutcomeSeconds); n == 0 {
		t.Error("no outcome latency series")
	}
}
