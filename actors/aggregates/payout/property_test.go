package payout_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	pf "paysvc/actors/aggregates/payout"
	"paysvc/actors/values/money"
)

func cents(t *testing.T, a money.Amount) int64 {
	t.Helper()
	c, err := a.Cents()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fileMoveAllowed is the file machine's table.
func fileMoveAllowed(from, to string) bool { return pf.CanMove(from, to) }

// A random file, random rejections, and the rail's outcomes delivered in random
// groupings, repeated, contradicted, for unknown ids, with both stages interleaved:
// at the end the file is COMPLETE, nothing is held, and every cent held was either
// paid out or released exactly once.
func TestApply_Property(t *testing.T) {
	t.Parallel()
	for iter := range 200 {
		t.Run(fmt.Sprintf("Seed_%d", iter), func(t *testing.T) {
			t.Parallel()
			runProperty(t, rand.New(rand.NewPCG(20260102, uint64(iter))))
		})
	}
}

func runProperty(t *testing.T, rng *rand.Rand) {
	n := 1 + rng.IntN(50)
	txns := make([]pf.Txn, n)
	var total, charges int64
	for i := range txns {
		amount := 1 + rng.Int64N(10_000_000) // 0.01 .. 100000.00
		if rng.IntN(10) == 0 {
			amount = 1 + rng.Int64N(100) // some tiny ones
		}
		var charge int64
		if rng.IntN(4) != 0 {
			charge = rng.Int64N(20_000)
		}
		txns[i] = pf.Txn{TransactionID: fmt.Sprintf("T%03d", i), Account: fmt.Sprintf("2547%08d", i),
			Amount: money.FromUnits(amount), Charge: money.FromUnits(charge)}
		total += amount
		charges += charge
	}
	s, _ := mustApply(t, pf.State{}, pf.Create{Header: header(), Txns: txns, At: at})
	if cents(t, s.TotalAmount) != total || cents(t, s.ChargeEstimate) != charges {
		t.Fatalf("create totals %s/%s, want %d/%d cents", s.TotalAmount, s.ChargeEstimate, total, charges)
	}

	// Rejections: none, all, or some; sometimes for an id not in the file.
	rejected := map[string]string{}
	pReject := []int{0, 100, rng.IntN(40)}[rng.IntN(3)]
	for _, x := range txns {
		if rng.IntN(100) < pReject {
			rejected[x.TransactionID] = "dup " + x.TransactionID
		}
	}
	if rng.IntN(4) == 0 {
		rejected["GHOST"] = "not in the file"
	}
	var holdModel int64
	for _, x := range txns {
		if _, no := rejected[x.TransactionID]; !no {
			holdModel += cents(t, x.Amount) + cents(t, x.Charge)
		}
	}
	wantHold := pf.HoldFor(s, rejected)
	if cents(t, wantHold) != holdModel {
		t.Fatalf("HoldFor = %s, want %d cents", wantHold, holdModel)
	}
	prev := s
	s, d := mustApply(t, s, pf.Approve{Rejected: rejected, SubmitNow: rng.IntN(2) == 0, At: at})
	checkStep(t, prev, s, d, 0)
	if !d.Hold.Equal(wantHold) || !s.Held.Equal(wantHold) {
		t.Fatalf("approve hold %s held %s, want %s", d.Hold, s.Held, wantHold)
	}
	sumHold := cents(t, d.Hold)
	var sumPaid, sumRelease int64
	paidOnce := map[string]bool{}
	// results applies one result and books the money it moved.
	results := func(r pf.Results) {
		prev := s
		var d pf.Delta
		s, d = mustApply(t, s, r)
		checkStep(t, prev, s, d, len(r.Outcomes))
		sumHold += cents(t, d.Hold)
		sumRelease += cents(t, d.Release)
		for _, p := range d.Paid {
			if paidOnce[p.TransactionID] {
				t.Fatalf("%s paid twice", p.TransactionID)
			}
			paidOnce[p.TransactionID] = true
			sumPaid += cents(t, p.Amount) + cents(t, p.Charge)
		}
	}

	// The rail's answers: each payable transaction gets a SUBMITTED (maybe) and a
	// FINAL; then repeats with either answer, answers for rejected and unknown ids.
	var events []pf.Outcome
	var stages []bool // true: FINAL
	add := func(o pf.Outcome, fin bool) { events, stages = append(events, o), append(stages, fin) }
	for _, x := range txns {
		id := x.TransactionID
		if _, no := rejected[id]; no {
			if rng.IntN(3) == 0 {
				add(ok(id), rng.IntN(2) == 0)
			}
			continue
		}
		add(ok(id), false) // the rails role reports every submission
		if rng.IntN(10) < 7 {
			add(ok(id), true)
		} else {
			add(ko(id), true)
		}
		for range rng.IntN(3) {
			if rng.IntN(2) == 0 {
				add(ok(id), rng.IntN(2) == 0)
			} else {
				add(ko(id), rng.IntN(2) == 0)
			}
		}
	}
	for range rng.IntN(4) {
		add(ok(fmt.Sprintf("UNKNOWN%d", rng.IntN(100))), rng.IntN(2) == 0)
	}
	order := rng.Perm(len(events))

	// firstFinal is the model: the first FINAL answer delivered for a transaction
	// after its submission wins; one delivered before it is ignored.
	firstFinal := map[string]bool{}
	for len(order) > 0 {
		k := min(len(order), 1+rng.IntN(8))
		chunk := order[:k]
		order = order[k:]
		var sub, fin []pf.Outcome
		for _, i := range chunk {
			if stages[i] {
				fin = append(fin, events[i])
			} else {
				sub = append(sub, events[i])
			}
		}
		batches := []pf.Results{submitted(sub...), final(fin...)}
		if rng.IntN(2) == 0 {
			batches[0], batches[1] = batches[1], batches[0]
		}
		for _, r := range batches {
			if len(r.Outcomes) == 0 && rng.IntN(2) == 0 {
				continue
			}
			if r.Final {
				for _, o := range r.Outcomes {
					if _, seen := firstFinal[o.TransactionID]; !seen && s.Status == pf.StatusProcessing {
						if i, in := s.Index()[o.TransactionID]; in && s.Txns[i].Status == pf.TxnProcessing {
							firstFinal[o.TransactionID] = o.Success
						}
					}
				}
			}
			results(r)
		}
	}

	// Transactions whose every FINAL answer came before their submission are still
	// PROCESSING: their real outcome comes now, as it would from the rail.
	var late []pf.Outcome
	for _, x := range s.Txns {
		if x.Status == pf.TxnProcessing {
			o := ok(x.TransactionID)
			if rng.IntN(2) == 0 {
				o = ko(x.TransactionID)
			}
			late = append(late, o)
			firstFinal[o.TransactionID] = o.Success
		}
	}
	if len(late) > 0 {
		results(final(late...))
	}

	if s.Status != pf.StatusComplete || s.StatusCode != pf.CodeCompleted || s.Finished != s.Count || s.Count != n {
		t.Fatalf("end: %s/%s finished %d of %d", s.Status, s.StatusCode, s.Finished, s.Count)
	}
	if !s.Held.IsZero() {
		t.Fatalf("end: %s still held", s.Held)
	}
	if !s.PaidAmount.Add(s.FailedAmount).Equal(s.TotalAmount) {
		t.Fatalf("paid %s + failed %s != total %s", s.PaidAmount, s.FailedAmount, s.TotalAmount)
	}
	if sumHold != sumPaid+sumRelease {
		t.Fatalf("held %d cents, paid %d + released %d", sumHold, sumPaid, sumRelease)
	}
	var paid, failed, actual int64
	for _, x := range s.Txns {
		if !x.Final() {
			t.Fatalf("txn %s is %s at the end", x.TransactionID, x.Status)
		}
		id := x.TransactionID
		if reason, no := rejected[id]; no {
			if x.Status != pf.TxnFailed || x.StatusDescription != reason {
				t.Fatalf("rejected %s is %s %q", id, x.Status, x.StatusDescription)
			}
		} else if want := firstFinal[id]; (x.Status == pf.TxnComplete) != want {
			t.Fatalf("%s is %s, first final answer was success=%v", id, x.Status, want)
		}
		if x.Status == pf.TxnComplete {
			paid += cents(t, x.Amount)
			actual += cents(t, x.Charge)
			if !paidOnce[id] {
				t.Fatalf("%s COMPLETE but never in Delta.Paid", id)
			}
		} else {
			failed += cents(t, x.Amount)
			if paidOnce[id] {
				t.Fatalf("%s FAILED but was in Delta.Paid", id)
			}
		}
	}
	if cents(t, s.PaidAmount) != paid || cents(t, s.FailedAmount) != failed || cents(t, s.ActualCharges) != actual {
		t.Fatalf("paid %s failed %s charges %s, want %d/%d/%d cents", s.PaidAmount, s.FailedAmount, s.ActualCharges, paid, failed, actual)
	}
	if len(paidOnce) != countStatus(s, pf.TxnComplete) {
		t.Fatalf("%d paid in deltas, %d COMPLETE", len(paidOnce), countStatus(s, pf.TxnComplete))
	}
}

func countStatus(s pf.State, status string) int {
	c := 0
	for _, x := range s.Txns {
		if x.Status == status {
			c++
		}
	}
	return c
}

// checkStep checks one accepted command: moves allowed by the tables, every outcome
// either changes one transaction or is ignored, the version moves with a change,
// and the file's own count of what it holds matches its transactions.
func checkStep(t *testing.T, prev, s pf.State, d pf.Delta, outcomes int) {
	t.Helper()
	checkTxnMoves(t, prev, s)
	if s.Status != prev.Status {
		if !d.Moved || !fileMoveAllowed(prev.Status, s.Status) {
			t.Fatalf("file %s -> %s (Moved=%v)", prev.Status, s.Status, d.Moved)
		}
	} else if d.Moved {
		t.Fatalf("Moved without a status change")
	}
	changed := map[int]bool{}
	for _, i := range d.Changed {
		if changed[i] {
			t.Fatalf("position %d changed twice in one delta %v", i, d.Changed)
		}
		changed[i] = true
	}
	for i := range s.Txns {
		if !changed[i] && !reflect.DeepEqual(prev.Txns[i], s.Txns[i]) {
			t.Fatalf("txn %d changed but not in Delta.Changed", i)
		}
	}
	if len(d.Changed) == 0 && prev.Status == s.Status {
		if s.Version != prev.Version {
			t.Fatalf("version %d -> %d with nothing changed", prev.Version, s.Version)
		}
		if !reflect.DeepEqual(prev, s) {
			t.Fatal("state changed with nothing in Delta.Changed")
		}
	} else if s.Version != prev.Version+1 {
		t.Fatalf("version %d -> %d", prev.Version, s.Version)
	}
	if prev.Status == pf.StatusProcessing || prev.Status == pf.StatusComplete {
		if d.Ignored+len(d.Changed) != outcomes {
			t.Fatalf("%d outcomes: %d ignored + %d changed", outcomes, d.Ignored, len(d.Changed))
		}
	}
	var held, failed, paid, actual int64
	finished := 0
	for _, x := range s.Txns {
		switch x.Status {
		case pf.TxnPending, pf.TxnProcessing:
			held += cents(t, x.Amount) + cents(t, x.Charge)
		case pf.TxnComplete:
			paid += cents(t, x.Amount)
			actual += cents(t, x.Charge)
			finished++
		case pf.TxnFailed:
			failed += cents(t, x.Amount)
			finished++
		}
	}
	if cents(t, s.Held) != held || cents(t, s.PaidAmount) != paid || cents(t, s.FailedAmount) != failed ||
		cents(t, s.ActualCharges) != actual || s.Finished != finished {
		t.Fatalf("header held %s paid %s failed %s charges %s finished %d; txns say %d/%d/%d/%d cents, %d finished",
			s.Held, s.PaidAmount, s.FailedAmount, s.ActualCharges, s.Finished, held, paid, failed, actual, finished)
	}
}
