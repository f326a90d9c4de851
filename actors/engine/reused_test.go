package engine_test

import (
	"testing"

	"paysvc/actors/engine"
)

// A command whose id was already applied as another type (an Idempotency-Key reused
// for another operation) is refused with idempotency_key_reused: it is neither applied
// nor answered with the first command's reply. A true duplicate still gets the
// stored reply.
func TestReusedCommandIDOfAnotherType(t *testing.T) {
	t.Parallel()
	b := setupRunning(t)
	w := b.fundedWorking(t, "100.00")

	wBefore := b.balance(t, b.merchant, w)
	dep := depositCmd(b, t, b.merchant, b.settle, "5.00")
	first := b.send(t, dep)
	ok(t, first)
	tr := transferCmd(b, t, b.merchant, b.settle, w, "7.00")
	tr.ID = dep.ID
	wantCode(t, b.send(t, tr), engine.CodeIdempotencyKeyReused)
	settle, working := b.balance(t, b.merchant, b.settle), b.balance(t, b.merchant, w)
	if settle != "105.00" || working != wBefore {
		t.Fatalf("settlement %s, working %s (was %s): the reused id moved money", settle, working, wBefore)
	}

	again := b.send(t, dep)
	if again.Error != nil || string(again.Result) != string(first.Result) {
		t.Fatalf("a true duplicate: %+v, want the stored reply %+v", again, first)
	}
	b.wantBalance(t, b.merchant, b.settle, "105.00")
	b.ledgerOK(t)
}
