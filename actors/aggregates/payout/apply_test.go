package payout_test

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	pf "paysvc/actors/aggregates/payout"
	"paysvc/actors/values/money"
)

var (
	at    = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	later = at.Add(time.Hour)
)

func amt(s string) money.Amount { return money.MustParse(s) }

func wantAmount(t *testing.T, what string, got money.Amount, want string) {
	t.Helper()
	if !got.Equal(amt(want)) {
		t.Fatalf("%s = %s, want %s", what, got, want)
	}
}

func header() pf.Header {
	return pf.Header{FileID: "F1", TrackingID: "TRK1", Nonce: "n1", MerchantID: "M1", WalletID: "W1",
		Provider: pf.ProviderB2C, Currency: "KES", RequiresApproval: true}
}

func txn(id, amount, charge string) pf.Txn {
	return pf.Txn{TransactionID: id, RequestReferenceID: "ref-" + id, Account: "2547" + id,
		Amount: amt(amount), Charge: amt(charge), Narrative: "pay " + id}
}

// threeTxns is the usual file: total 350.51, charges 3.75.
func threeTxns() []pf.Txn {
	return []pf.Txn{txn("T1", "100.00", "1.50"), txn("T2", "250.50", "2.25"), txn("T3", "0.01", "0.00")}
}

func mustApply(t *testing.T, s pf.State, cmd any) (pf.State, pf.Delta) {
	t.Helper()
	n, d, err := pf.Apply(s, cmd)
	if err != nil {
		t.Fatalf("Apply(%T): %v", cmd, err)
	}
	return n, d
}

// created returns a PREVIEW-AND-APPROVE file of txns (threeTxns when none given).
func created(t *testing.T, txns ...pf.Txn) pf.State {
	t.Helper()
	if len(txns) == 0 {
		txns = threeTxns()
	}
	s, _ := mustApply(t, pf.State{}, pf.Create{Header: header(), Txns: txns, At: at})
	return s
}

// legacyFailed is the usual file as earlier versions stored it after failing it for
// an unfunded approval (FAILED, BF110, every transaction failed). No command makes
// one any more, but stored ones must stay terminal.
func legacyFailed(t *testing.T) pf.State {
	t.Helper()
	s := created(t)
	s.Txns = slices.Clone(s.Txns)
	for i := range s.Txns {
		s.Txns[i].Status, s.Txns[i].StatusCode, s.Txns[i].StatusDescription = pf.TxnFailed, pf.TxnCodeFailed, "insufficient funds"
	}
	s.Status, s.StatusCode, s.FailedReason = pf.StatusFailed, pf.CodeFileFailed, "insufficient funds"
	s.FailedAmount, s.Finished, s.Version = s.TotalAmount, s.Count, s.Version+1
	return s
}

// processing returns the usual file approved with nothing rejected.
func processing(t *testing.T, submitNow bool) pf.State {
	t.Helper()
	s, _ := mustApply(t, created(t), pf.Approve{SubmitNow: submitNow, At: at})
	return s
}

func ok(id string) pf.Outcome {
	return pf.Outcome{TransactionID: id, Success: true, Description: "paid " + id, ProviderReference: "PR-" + id, ProviderAccountName: "NAME " + id}
}

func ko(id string) pf.Outcome {
	return pf.Outcome{TransactionID: id, Description: "refused " + id}
}

func final(os ...pf.Outcome) pf.Results     { return pf.Results{Final: true, Outcomes: os, At: later} }
func submitted(os ...pf.Outcome) pf.Results { return pf.Results{Outcomes: os, At: later} }

// clone copies a state deeply enough to detect any mutation by Apply.
func clone(s pf.State) pf.State {
	c := s
	c.Txns = slices.Clone(s.Txns)
	return c
}

// wantUnchanged checks that a refused or no-op command returned the input state.
func wantUnchanged(t *testing.T, before, got pf.State) {
	t.Helper()
	if !reflect.DeepEqual(before, got) {
		t.Fatalf("state changed:\n got  %+v\n want %+v", got, before)
	}
}

// wantRefused applies cmd to s and checks that Apply refused it with want: the
// state it returns is s, s itself is untouched, and no money moves.
func wantRefused(t *testing.T, s pf.State, cmd any, want error) {
	t.Helper()
	before := clone(s)
	n, d, err := pf.Apply(s, cmd)
	if !errors.Is(err, want) {
		t.Fatalf("%T: err = %v, want %v", cmd, err, want)
	}
	wantUnchanged(t, before, n)
	wantUnchanged(t, before, s)
	if !reflect.DeepEqual(d, pf.Delta{}) {
		t.Fatalf("delta %+v", d)
	}
}

func wantTxn(t *testing.T, x pf.Txn, status, code, desc string) {
	t.Helper()
	if x.Status != status || x.StatusCode != code || x.StatusDescription != desc {
		t.Fatalf("txn %s = %s/%s %q, want %s/%s %q", x.TransactionID, x.Status, x.StatusCode, x.StatusDescription, status, code, desc)
	}
}

func TestApply_Create(t *testing.T) {
	t.Parallel()

	t.Run("Create_TotalsStatusesAndVersion", func(t *testing.T) {
		t.Parallel()
		in := threeTxns()
		// Whatever status the caller sends, Create sets its own.
		in[1].Status, in[1].StatusCode, in[1].StatusDescription, in[1].ProviderReference = pf.TxnComplete, pf.TxnCodeSuccess, "x", "PR"
		h := header()
		h.Held, h.PaidAmount, h.Version, h.Status, h.Finished = amt("9.99"), amt("1.00"), 7, pf.StatusComplete, 3
		s, d, err := pf.Apply(pf.State{}, pf.Create{Header: h, Txns: in, At: at})
		if err != nil {
			t.Fatal(err)
		}
		if !s.Exists() || s.Version != 1 || s.Status != pf.StatusPreview || s.StatusCode != pf.CodeAwaiting {
			t.Fatalf("header %+v", s.Header)
		}
		if s.FileID != "F1" || s.MerchantID != "M1" || s.WalletID != "W1" || s.Count != 3 || s.Finished != 0 ||
			!s.CreatedAt.Equal(at) || !s.UpdatedAt.Equal(at) {
			t.Fatalf("header %+v", s.Header)
		}
		wantAmount(t, "total_amount", s.TotalAmount, "350.51")
		wantAmount(t, "charge_estimate", s.ChargeEstimate, "3.75")
		for what, a := range map[string]money.Amount{"held": s.Held, "paid": s.PaidAmount, "failed": s.FailedAmount, "actual_charges": s.ActualCharges} {
			wantAmount(t, what, a, "0.00")
		}
		if len(s.Txns) != 3 {
			t.Fatalf("%d txns", len(s.Txns))
		}
		for i, x := range s.Txns {
			wantTxn(t, x, pf.TxnPending, pf.TxnCodeNew, "")
			if x.TransactionID != in[i].TransactionID || x.ProviderReference != "" || !x.CreatedAt.Equal(at) || !x.UpdatedAt.Equal(at) {
				t.Fatalf("txn %d %+v", i, x)
			}
		}
		if !d.Moved || !slices.Equal(d.Changed, []int{0, 1, 2}) || len(d.Paid) != 0 || !d.Hold.IsZero() || !d.Release.IsZero() {
			t.Fatalf("delta %+v", d)
		}
		// The command's slice is the caller's: untouched.
		if in[1].Status != pf.TxnComplete {
			t.Fatal("Create mutated the command's transactions")
		}
	})

	t.Run("Create_Twice_ErrExists", func(t *testing.T) {
		t.Parallel()
		wantRefused(t, created(t), pf.Create{Header: header(), Txns: threeTxns(), At: later}, pf.ErrExists)
	})

	invalid := map[string]func(*pf.Create){
		"NoTxns":           func(c *pf.Create) { c.Txns = nil },
		"EmptyTxns":        func(c *pf.Create) { c.Txns = []pf.Txn{} },
		"DuplicateTxnID":   func(c *pf.Create) { c.Txns[2].TransactionID = "T1" },
		"ZeroAmount":       func(c *pf.Create) { c.Txns[1].Amount = amt("0.00") },
		"ZeroValueAmount":  func(c *pf.Create) { c.Txns[1].Amount = money.Amount{} },
		"NegativeAmount":   func(c *pf.Create) { c.Txns[0].Amount = amt("-0.01") },
		"NegativeCharge":   func(c *pf.Create) { c.Txns[2].Charge = amt("-1.00") },
		"MissingTxnID":     func(c *pf.Create) { c.Txns[1].TransactionID = "" },
		"MissingFileID":    func(c *pf.Create) { c.Header.FileID = "" },
		"MissingMerchant":  func(c *pf.Create) { c.Header.MerchantID = "" },
		"MissingWallet":    func(c *pf.Create) { c.Header.WalletID = "" },
		"MissingProvider":  func(c *pf.Create) { c.Header.Provider = "" },
		"MissingCurrency":  func(c *pf.Create) { c.Header.Currency = "" },
		"LastTxnInvalid":   func(c *pf.Create) { c.Txns = append(c.Txns, txn("T4", "-5.00", "0.00")) },
		"DuplicateAtEnd":   func(c *pf.Create) { c.Txns = append(c.Txns, txn("T3", "5.00", "0.00")) },
		"SingleZeroAmount": func(c *pf.Create) { c.Txns = []pf.Txn{txn("T1", "0", "0")} },
	}
	for name, mutate := range invalid {
		t.Run("Create_Invalid_"+name, func(t *testing.T) {
			t.Parallel()
			c := pf.Create{Header: header(), Txns: threeTxns(), At: at}
			mutate(&c)
			wantRefused(t, pf.State{}, c, pf.ErrInvalid)
		})
	}

	t.Run("Create_ZeroChargeAllowed", func(t *testing.T) {
		t.Parallel()
		s := created(t, txn("T1", "0.01", "0"))
		wantAmount(t, "total", s.TotalAmount, "0.01")
		wantAmount(t, "charges", s.ChargeEstimate, "0.00")
	})
}

func TestApply_Approve(t *testing.T) {
	t.Parallel()

	t.Run("Approve_HoldsEverythingWhenNothingRejected", func(t *testing.T) {
		t.Parallel()
		s := created(t)
		n, d := mustApply(t, s, pf.Approve{At: later})
		wantAmount(t, "delta hold", d.Hold, "354.26")
		if !d.Hold.Equal(pf.HoldFor(s, nil)) || !n.Held.Equal(d.Hold) {
			t.Fatalf("hold %s, HoldFor %s, held %s", d.Hold, pf.HoldFor(s, nil), n.Held)
		}
		if n.Status != pf.StatusProcessing || n.StatusCode != pf.CodePaying || n.Version != 2 || !n.UpdatedAt.Equal(later) || n.Finished != 0 {
			t.Fatalf("header %+v", n.Header)
		}
		for _, x := range n.Txns {
			wantTxn(t, x, pf.TxnPending, pf.TxnCodeNew, "")
		}
		if !d.Moved || len(d.Changed) != 0 || len(d.Paid) != 0 || !d.Release.IsZero() {
			t.Fatalf("delta %+v", d)
		}
		wantAmount(t, "failed", n.FailedAmount, "0.00")
	})

	t.Run("Approve_RejectedFailWithReasonAndLeaveTheHold", func(t *testing.T) {
		t.Parallel()
		s := created(t)
		rej := map[string]string{"T2": "idempotency key already paid", "GHOST": "not in the file"}
		n, d := mustApply(t, s, pf.Approve{Rejected: rej, At: later})
		wantAmount(t, "hold", d.Hold, "101.51") // T1 100.00+1.50, T3 0.01+0.00
		if !d.Hold.Equal(pf.HoldFor(s, rej)) || !n.Held.Equal(d.Hold) {
			t.Fatalf("hold %s, HoldFor %s, held %s", d.Hold, pf.HoldFor(s, rej), n.Held)
		}
		wantTxn(t, n.Txns[1], pf.TxnFailed, pf.TxnCodeFailed, "idempotency key already paid")
		if !n.Txns[1].UpdatedAt.Equal(later) {
			t.Fatalf("rejected txn updated_at %v", n.Txns[1].UpdatedAt)
		}
		wantTxn(t, n.Txns[0], pf.TxnPending, pf.TxnCodeNew, "")
		wantTxn(t, n.Txns[2], pf.TxnPending, pf.TxnCodeNew, "")
		wantAmount(t, "failed_amount", n.FailedAmount, "250.50")
		wantAmount(t, "paid_amount", n.PaidAmount, "0.00")
		if n.Finished != 1 || n.Status != pf.StatusProcessing || !slices.Equal(d.Changed, []int{1}) || !d.Release.IsZero() {
			t.Fatalf("header %+v delta %+v", n.Header, d)
		}
	})

	t.Run("Approve_SubmitNowMarksTheRestProcessing", func(t *testing.T) {
		t.Parallel()
		s := created(t)
		n, d := mustApply(t, s, pf.Approve{Rejected: map[string]string{"T1": "dup"}, SubmitNow: true, At: later})
		wantTxn(t, n.Txns[0], pf.TxnFailed, pf.TxnCodeFailed, "dup")
		for _, i := range []int{1, 2} {
			wantTxn(t, n.Txns[i], pf.TxnProcessing, pf.TxnCodeStarted, "")
			if !n.Txns[i].UpdatedAt.Equal(later) {
				t.Fatalf("txn %d updated_at %v", i, n.Txns[i].UpdatedAt)
			}
		}
		wantAmount(t, "hold", d.Hold, "252.76")
		if !slices.Equal(d.Changed, []int{0, 1, 2}) {
			t.Fatalf("changed %v", d.Changed)
		}
	})

	t.Run("Approve_AllRejectedCompletesAtOnceWithZeroHold", func(t *testing.T) {
		t.Parallel()
		s := created(t)
		rej := map[string]string{"T1": "a", "T2": "b", "T3": "c"}
		n, d := mustApply(t, s, pf.Approve{Rejected: rej, SubmitNow: true, At: later})
		wantAmount(t, "hold", d.Hold, "0.00")
		wantAmount(t, "held", n.Held, "0.00")
		wantAmount(t, "HoldFor", pf.HoldFor(s, rej), "0.00")
		wantAmount(t, "failed", n.FailedAmount, "350.51")
		wantAmount(t, "paid", n.PaidAmount, "0.00")
		if n.Status != pf.StatusComplete || n.StatusCode != pf.CodeCompleted || n.Finished != 3 || !d.Moved {
			t.Fatalf("header %+v delta %+v", n.Header, d)
		}
		for _, x := range n.Txns {
			wantTxn(t, x, pf.TxnFailed, pf.TxnCodeFailed, rej[x.TransactionID])
		}
	})

	t.Run("Approve_Twice_ErrNotAwaitingApproval", func(t *testing.T) {
		t.Parallel()
		wantRefused(t, processing(t, false), pf.Approve{At: later}, pf.ErrNotAwaitingApproval)
	})

	t.Run("Approve_Unknown_ErrNotFound", func(t *testing.T) {
		t.Parallel()
		wantRefused(t, pf.State{}, pf.Approve{}, pf.ErrNotFound)
	})
}

func TestApply_Cancel(t *testing.T) {
	t.Parallel()

	t.Run("Cancel_TxnsStayPendingWithTC108", func(t *testing.T) {
		t.Parallel()
		s := created(t)
		n, d := mustApply(t, s, pf.Cancel{At: later})
		if n.Status != pf.StatusCancelled || n.StatusCode != pf.CodeCancelled || n.Version != 2 || !n.UpdatedAt.Equal(later) || n.Finished != 0 {
			t.Fatalf("header %+v", n.Header)
		}
		wantAmount(t, "paid_amount", n.PaidAmount, "0.00")
		wantAmount(t, "actual_charges", n.ActualCharges, "0.00")
		wantAmount(t, "failed_amount", n.FailedAmount, "0.00")
		wantAmount(t, "held", n.Held, "0.00")
		wantAmount(t, "total_amount", n.TotalAmount, "350.51")
		for _, x := range n.Txns {
			wantTxn(t, x, pf.TxnPending, pf.TxnCodeCancelled, "")
			if !x.UpdatedAt.Equal(later) {
				t.Fatalf("updated_at %v", x.UpdatedAt)
			}
		}
		if !d.Moved || !slices.Equal(d.Changed, []int{0, 1, 2}) || !d.Hold.IsZero() || !d.Release.IsZero() || len(d.Paid) != 0 {
			t.Fatalf("delta %+v", d)
		}
	})

	refusals := []struct {
		name string
		from func(*testing.T) pf.State
		cmd  any
		want error
	}{
		{"Cancel_FromProcessing_ErrNotCancellable", func(t *testing.T) pf.State { return processing(t, false) }, pf.Cancel{}, pf.ErrNotCancellable},
		{"Cancel_Twice_ErrNotCancellable", func(t *testing.T) pf.State { s, _ := mustApply(t, created(t), pf.Cancel{}); return s }, pf.Cancel{}, pf.ErrNotCancellable},
		{"Cancel_LegacyFailed_ErrNotCancellable", legacyFailed, pf.Cancel{}, pf.ErrNotCancellable},
		{"Approve_LegacyFailed_ErrNotAwaitingApproval", legacyFailed, pf.Approve{}, pf.ErrNotAwaitingApproval},
		{"Cancel_Unknown_ErrNotFound", func(t *testing.T) pf.State { return pf.State{} }, pf.Cancel{}, pf.ErrNotFound},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wantRefused(t, tc.from(t), tc.cmd, tc.want)
		})
	}
}

func TestApply_Results(t *testing.T) {
	t.Parallel()

	t.Run("Submitted_MovesOnlyPendingTxns", func(t *testing.T) {
		t.Parallel()
		s, _ := mustApply(t, created(t), pf.Approve{Rejected: map[string]string{"T3": "dup"}, At: at})
		n, d := mustApply(t, s, submitted(ok("T1"), ok("T3"), ok("NOPE")))
		wantTxn(t, n.Txns[0], pf.TxnProcessing, pf.TxnCodeStarted, "")
		wantTxn(t, n.Txns[1], pf.TxnPending, pf.TxnCodeNew, "")
		wantTxn(t, n.Txns[2], pf.TxnFailed, pf.TxnCodeFailed, "dup")
		if !n.Txns[0].UpdatedAt.Equal(later) || n.Version != s.Version+1 || n.Status != pf.StatusProcessing || n.Finished != s.Finished {
			t.Fatalf("state %+v", n)
		}
		if d.Moved || d.Ignored != 2 || !slices.Equal(d.Changed, []int{0}) || len(d.Paid) != 0 || !d.Release.IsZero() || !d.Hold.IsZero() {
			t.Fatalf("delta %+v", d)
		}
		if !n.Held.Equal(s.Held) || !n.PaidAmount.Equal(s.PaidAmount) || !n.FailedAmount.Equal(s.FailedAmount) {
			t.Fatalf("submitted moved money: %+v", n.Header)
		}
		// Again: nothing to move, nothing changes, not even the version.
		n2, d2 := mustApply(t, n, submitted(ok("T1"), ok("T1")))
		wantUnchanged(t, n, n2)
		if d2.Ignored != 2 || len(d2.Changed) != 0 || d2.Moved {
			t.Fatalf("delta %+v", d2)
		}
	})

	t.Run("Final_SuccessPaysOutOfTheHold", func(t *testing.T) {
		t.Parallel()
		s := processing(t, true)
		n, d := mustApply(t, s, final(ok("T1")))
		x := n.Txns[0]
		wantTxn(t, x, pf.TxnComplete, pf.TxnCodeSuccess, "paid T1")
		if x.ProviderReference != "PR-T1" || x.ProviderAccountName != "NAME T1" || !x.UpdatedAt.Equal(later) {
			t.Fatalf("txn %+v", x)
		}
		wantAmount(t, "paid_amount", n.PaidAmount, "100.00")
		wantAmount(t, "actual_charges", n.ActualCharges, "1.50")
		wantAmount(t, "failed_amount", n.FailedAmount, "0.00")
		wantAmount(t, "held", n.Held, "252.76") // 354.26 - 101.50
		want := []pf.Payment{{TransactionID: "T1", Account: "2547T1", Amount: amt("100.00"), Charge: amt("1.50")}}
		if len(d.Paid) != 1 || d.Paid[0].TransactionID != "T1" || d.Paid[0].Account != want[0].Account ||
			!d.Paid[0].Amount.Equal(want[0].Amount) || !d.Paid[0].Charge.Equal(want[0].Charge) {
			t.Fatalf("paid %+v, want %+v", d.Paid, want)
		}
		wantAmount(t, "release", d.Release, "0.00")
		if d.Moved || d.Ignored != 0 || !slices.Equal(d.Changed, []int{0}) || n.Finished != 1 || n.Version != s.Version+1 || n.Status != pf.StatusProcessing {
			t.Fatalf("state %+v delta %+v", n.Header, d)
		}
	})

	t.Run("Final_FailureReleasesAmountAndCharge", func(t *testing.T) {
		t.Parallel()
		s, _ := mustApply(t, processing(t, false), submitted(ok("T2")))
		n, d := mustApply(t, s, final(ko("T2")))
		wantTxn(t, n.Txns[1], pf.TxnFailed, pf.TxnCodeFailed, "refused T2")
		wantAmount(t, "failed_amount", n.FailedAmount, "250.50")
		wantAmount(t, "paid_amount", n.PaidAmount, "0.00")
		wantAmount(t, "actual_charges", n.ActualCharges, "0.00")
		wantAmount(t, "release", d.Release, "252.75")
		wantAmount(t, "held", n.Held, "101.51")
		if len(d.Paid) != 0 || d.Moved || !slices.Equal(d.Changed, []int{1}) || n.Finished != 1 {
			t.Fatalf("delta %+v", d)
		}
	})

	// A FINAL outcome for a transaction no rail has yet (still PENDING) is what a
	// forged or misrouted callback looks like: ignored, so it cannot release the
	// hold of a payment the rails role is about to send; the real outcome, after the
	// submission, still applies once.
	t.Run("Final_BeforeSubmissionIgnored", func(t *testing.T) {
		t.Parallel()
		s := processing(t, false)
		n, d := mustApply(t, s, final(ko("T1"), ok("T2"), ko("T3")))
		wantUnchanged(t, s, n)
		if d.Ignored != 3 || len(d.Changed) != 0 || len(d.Paid) != 0 || d.Moved || !d.Release.IsZero() ||
			!slices.Equal(d.Unsubmitted, []string{"T1", "T2", "T3"}) {
			t.Fatalf("delta %+v", d)
		}
		// Submitted, T1 takes its real outcome; the other two still wait.
		n, _ = mustApply(t, n, submitted(ok("T1")))
		n, d = mustApply(t, n, final(ok("T1"), ko("T2")))
		wantTxn(t, n.Txns[0], pf.TxnComplete, pf.TxnCodeSuccess, "paid T1")
		wantTxn(t, n.Txns[1], pf.TxnPending, pf.TxnCodeNew, "")
		if len(d.Paid) != 1 || !d.Release.IsZero() || d.Ignored != 1 || !slices.Equal(d.Unsubmitted, []string{"T2"}) {
			t.Fatalf("delta %+v", d)
		}
		wantAmount(t, "held", n.Held, "252.76") // 354.26 - 101.50: nothing released
	})

	t.Run("Final_RepeatsAndUnknownIgnored", func(t *testing.T) {
		t.Parallel()
		s := processing(t, true)
		n, d := mustApply(t, s, final(ok("T1"), ok("T1"), ko("T1"), ko("T2"), ok("T2"), ok("ZZ")))
		if d.Ignored != 4 || !slices.Equal(d.Changed, []int{0, 1}) || len(d.Paid) != 1 || d.Paid[0].TransactionID != "T1" {
			t.Fatalf("delta %+v", d)
		}
		wantAmount(t, "release", d.Release, "252.75")
		wantTxn(t, n.Txns[0], pf.TxnComplete, pf.TxnCodeSuccess, "paid T1")
		wantTxn(t, n.Txns[1], pf.TxnFailed, pf.TxnCodeFailed, "refused T2")
		// Delivered again, in another grouping and with the other answer: nothing.
		for _, r := range []pf.Results{final(ko("T1")), final(ok("T2"), ok("T1")), final(ok("ZZ")), submitted(ok("T1"), ok("T2")), final()} {
			n2, d2, err := pf.Apply(n, r)
			if err != nil {
				t.Fatal(err)
			}
			wantUnchanged(t, n, n2)
			if d2.Ignored != len(r.Outcomes) || len(d2.Changed) != 0 || len(d2.Paid) != 0 || d2.Moved || !d2.Release.IsZero() {
				t.Fatalf("%+v: delta %+v", r, d2)
			}
		}
	})

	t.Run("Final_LastTxnCompletesTheFile", func(t *testing.T) {
		t.Parallel()
		s := processing(t, true)
		s, _ = mustApply(t, s, final(ok("T1"), ko("T2")))
		n, d := mustApply(t, s, final(ok("T3")))
		if n.Status != pf.StatusComplete || n.StatusCode != pf.CodeCompleted || !d.Moved || n.Finished != 3 || n.Version != s.Version+1 {
			t.Fatalf("header %+v delta %+v", n.Header, d)
		}
		wantAmount(t, "held", n.Held, "0.00")
		wantAmount(t, "paid_amount", n.PaidAmount, "100.01")
		wantAmount(t, "failed_amount", n.FailedAmount, "250.50")
		wantAmount(t, "actual_charges", n.ActualCharges, "1.50")
		if !n.PaidAmount.Add(n.FailedAmount).Equal(n.TotalAmount) {
			t.Fatalf("paid %s + failed %s != total %s", n.PaidAmount, n.FailedAmount, n.TotalAmount)
		}
	})

	t.Run("Final_OneBatchCompletesTheFile", func(t *testing.T) {
		t.Parallel()
		s := processing(t, true)
		n, d := mustApply(t, s, final(ko("T3"), ok("T2"), ok("T1")))
		if n.Status != pf.StatusComplete || !d.Moved || !slices.Equal(d.Changed, []int{2, 1, 0}) || len(d.Paid) != 2 {
			t.Fatalf("header %+v delta %+v", n.Header, d)
		}
		wantAmount(t, "release", d.Release, "0.01")
		wantAmount(t, "held", n.Held, "0.00")
		wantAmount(t, "actual_charges", n.ActualCharges, "3.75")
	})

	t.Run("Results_OnCompleteFileAllIgnored", func(t *testing.T) {
		t.Parallel()
		s, _ := mustApply(t, processing(t, true), final(ok("T1"), ok("T2"), ok("T3")))
		for _, r := range []pf.Results{final(ko("T1"), ok("X")), submitted(ok("T2")), final()} {
			n, d, err := pf.Apply(s, r)
			if err != nil {
				t.Fatal(err)
			}
			wantUnchanged(t, s, n)
			if d.Ignored != len(r.Outcomes) || len(d.Changed) != 0 || len(d.Paid) != 0 || d.Moved || !d.Release.IsZero() || !d.Hold.IsZero() {
				t.Fatalf("delta %+v", d)
			}
		}
	})

	t.Run("Results_EmptyBatchChangesNothing", func(t *testing.T) {
		t.Parallel()
		s := processing(t, true)
		for _, r := range []pf.Results{final(), submitted()} {
			n, d := mustApply(t, s, r)
			wantUnchanged(t, s, n)
			if d.Ignored != 0 || len(d.Changed) != 0 || d.Moved {
				t.Fatalf("delta %+v", d)
			}
		}
	})

	for name, from := range map[string]func(*testing.T) pf.State{
		"Preview":   func(t *testing.T) pf.State { return created(t) },
		"Cancelled": func(t *testing.T) pf.State { s, _ := mustApply(t, created(t), pf.Cancel{}); return s },
		"Failed":    legacyFailed,
	} {
		t.Run("Results_On"+name+"_ErrNotProcessing", func(t *testing.T) {
			t.Parallel()
			s := from(t)
			for _, r := range []pf.Results{final(ok("T1")), submitted(ok("T1")), final()} {
				wantRefused(t, s, r, pf.ErrNotProcessing)
			}
		})
	}

	t.Run("Results_Unknown_ErrNotFound", func(t *testing.T) {
		t.Parallel()
		wantRefused(t, pf.State{}, final(ok("T1")), pf.ErrNotFound)
	})

	// A snapshot whose hold disagrees with its transactions must be refused, not paid.
	t.Run("Final_HoldShort_ErrHoldMismatch", func(t *testing.T) {
		t.Parallel()
		s := processing(t, true)
		s.Held = amt("100.00") // T1 needs 101.50
		wantRefused(t, s, final(ok("T3"), ok("T1")), pf.ErrHoldMismatch)
	})

	t.Run("Final_HoldLeftAtComplete_ErrHoldMismatch", func(t *testing.T) {
		t.Parallel()
		s := processing(t, true)
		s.Held = s.Held.Add(amt("0.01"))
		wantRefused(t, s, final(ok("T1"), ok("T2"), ko("T3")), pf.ErrHoldMismatch)
	})
}

func TestApply_UnknownCommand(t *testing.T) {
	t.Parallel()
	s := created(t)
	for _, cmd := range []any{nil, struct{}{}, &pf.Cancel{}, "cancel"} {
		n, _, err := pf.Apply(s, cmd)
		if err == nil {
			t.Fatalf("%T accepted", cmd)
		}
		wantUnchanged(t, s, n)
	}
}

// Apply never writes through the input state's Txns: the caller's snapshot (the
// actor's Before, what Restore puts back) must stay exactly what it was.
func TestApply_Purity(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		from func(*testing.T) pf.State
		cmd  any
	}{
		{"Approve", func(t *testing.T) pf.State { return created(t) }, pf.Approve{Rejected: map[string]string{"T2": "dup"}, SubmitNow: true, At: later}},
		{"ApproveAllRejected", func(t *testing.T) pf.State { return created(t) }, pf.Approve{Rejected: map[string]string{"T1": "a", "T2": "b", "T3": "c"}, At: later}},
		{"Cancel", func(t *testing.T) pf.State { return created(t) }, pf.Cancel{At: later}},
		{"ResultsSubmitted", func(t *testing.T) pf.State { return processing(t, false) }, submitted(ok("T1"), ok("T2"))},
		{"ResultsFinal", func(t *testing.T) pf.State { return processing(t, true) }, final(ok("T1"), ko("T2"))},
		{"ResultsFinalLast", func(t *testing.T) pf.State { return processing(t, true) }, final(ok("T1"), ko("T2"), ok("T3"))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := tc.from(t)
			before := clone(s)
			n, d := mustApply(t, s, tc.cmd)
			wantUnchanged(t, before, s)
			if len(d.Changed) == 0 {
				t.Fatal("command changed nothing: the case proves nothing")
			}
			if &n.Txns[0] == &s.Txns[0] {
				t.Fatal("new state shares the input's Txns array")
			}
			// Writing to the result must not reach the input either.
			n.Txns[0].Status = "SCRIBBLED"
			if s.Txns[0].Status == "SCRIBBLED" {
				t.Fatal("result aliases the input's transactions")
			}
		})
	}
}
