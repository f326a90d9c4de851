package payout_test

import (
	"errors"
	"testing"

	pf "paysvc/actors/aggregates/payout"
)

// An operator's fail of a file part paid, part with a rail, part unsent: only the
// unsent transactions fail and release their hold; the one a rail has keeps its
// hold for its outcome, after which the file completes with nothing held. Each
// change is in the audit, in order, and a hold of a held file changes nothing.
func TestApply_OperatorFailsOnlyTheUnsent(t *testing.T) {
	t.Parallel()
	s := processing(t, false)                             // T1, T2, T3 PENDING
	s, _ = mustApply(t, s, submitted(ok("T1"), ok("T2"))) // handed to the rail
	s, _ = mustApply(t, s, final(ok("T1")))               // T1 paid
	s, _ = mustApply(t, s, pf.Operator{Action: pf.ActionHold, By: "ops-a", Reason: "stolen key", CommandID: "c1", At: later})
	if _, _, err := pf.Apply(s, pf.Operator{Action: pf.ActionHold, By: "ops-a", At: later}); !errors.Is(err, pf.ErrNoChange) {
		t.Fatalf("hold of a held file: %v", err)
	}
	if _, _, err := pf.Apply(s, submitted(ok("T3"))); !errors.Is(err, pf.ErrOnHold) {
		t.Fatalf("submission of a held file: %v", err)
	}
	if _, _, err := pf.Apply(s, pf.Operator{Action: pf.ActionFail, By: "ops-a", At: later}); !errors.Is(err, pf.ErrInvalid) {
		t.Fatalf("fail without a reason: %v", err)
	}
	heldBefore := s.Held
	n, d := mustApply(t, s, pf.Operator{Action: pf.ActionFail, By: "ops-b", Reason: "wrong numbers", CommandID: "c2", At: later})
	t3 := s.Txns[2]
	if len(d.Changed) != 1 || d.Changed[0] != 2 || !d.Release.Equal(t3.Amount.Add(t3.Charge)) || len(d.Paid) != 0 {
		t.Fatalf("fail delta %+v", d)
	}
	if n.Txns[1].Status != pf.TxnProcessing || n.Txns[2].Status != pf.TxnFailed ||
		n.Txns[2].StatusDescription != "Failed by the operator: wrong numbers" || n.Status != pf.StatusProcessing {
		t.Fatalf("after fail: file %s, T2 %s, T3 %s %q", n.Status, n.Txns[1].Status, n.Txns[2].Status, n.Txns[2].StatusDescription)
	}
	if !n.Held.Equal(heldBefore.Sub(d.Release)) || n.OnHold || !n.FailedByOperator || n.FailedReason != "Failed by the operator: wrong numbers" {
		t.Fatalf("after fail: held %s, on hold %v, failed by operator %v, reason %q", n.Held, n.OnHold, n.FailedByOperator, n.FailedReason)
	}
	if _, _, err := pf.Apply(n, pf.Operator{Action: pf.ActionFail, By: "ops-b", Reason: "again", At: later}); !errors.Is(err, pf.ErrNoChange) {
		t.Fatalf("a second fail: %v", err)
	}
	done, _ := mustApply(t, n, final(ok("T2")))
	if done.Status != pf.StatusComplete || done.Held.Sign() != 0 {
		t.Fatalf("after T2's outcome: %s, held %s", done.Status, done.Held)
	}
	a := done.OperatorActions
	if len(a) != 2 || a[0].Action != pf.ActionHold || a[0].By != "ops-a" || a[0].CommandID != "c1" ||
		a[1].Action != pf.ActionFail || a[1].By != "ops-b" || a[1].Reason != "wrong numbers" || a[1].Failed != 1 {
		t.Fatalf("audit %+v", a)
	}
}
