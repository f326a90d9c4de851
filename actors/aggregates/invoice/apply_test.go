package invoice

import (
	"errors"
	"testing"
	"time"

	"paysvc/actors/values/money"
)

func created(t *testing.T) State {
	t.Helper()
	s, err := Apply(State{}, Create{InvoiceID: "INV1", MerchantID: "M", WalletID: "W", Provider: "M-PESA", Currency: "KES",
		Tariff: "BUSINESS-PAYS", Value: money.MustParse("100.00"), Charges: money.MustParse("1.50"),
		NetAmount: money.MustParse("98.50"), Account: "254700000000", APIRef: "ref", At: time.Unix(1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestApply(t *testing.T) {
	t.Parallel()
	at := time.Unix(2, 0)
	t.Run("Create", func(t *testing.T) {
		s := created(t)
		if s.State != StatePending || s.Version != 1 || !s.Value.Equal(money.MustParse("100.00")) {
			t.Fatalf("%+v", s)
		}
		if _, err := Apply(s, Create{InvoiceID: "INV1"}); !errors.Is(err, ErrExists) {
			t.Fatalf("second create: %v", err)
		}
	})
	t.Run("CreateRefusesInconsistentAmounts", func(t *testing.T) {
		for _, c := range []Create{
			{InvoiceID: "I", MerchantID: "M", WalletID: "W", Value: money.MustParse("10.00"), Charges: money.MustParse("1.00"), NetAmount: money.MustParse("8.00")},
			{InvoiceID: "I", MerchantID: "M", WalletID: "W", Value: money.MustParse("0.00"), NetAmount: money.MustParse("0.00")},
			{InvoiceID: "I", MerchantID: "M", Value: money.MustParse("10.00"), NetAmount: money.MustParse("10.00")},
			{InvoiceID: "I", MerchantID: "M", WalletID: "W", Value: money.MustParse("10.00"), Charges: money.MustParse("-1.00"), NetAmount: money.MustParse("11.00")},
		} {
			if _, err := Apply(State{}, c); !errors.Is(err, ErrInvalid) {
				t.Errorf("%+v: %v", c, err)
			}
		}
	})
	t.Run("AcceptThenSettle", func(t *testing.T) {
		s, err := Apply(created(t), Accept{CheckoutRequestID: "ws_1", At: at})
		if err != nil || s.State != StateProcessing || s.CheckoutRequestID != "ws_1" || s.Version != 2 || !s.UpdatedAt.Equal(at) {
			t.Fatalf("accept: %+v %v", s, err)
		}
		s, err = Apply(s, Settle{Receipt: "SIM123", At: at})
		if err != nil || s.State != StateComplete || s.MpesaReference != "SIM123" || s.Version != 3 {
			t.Fatalf("settle: %+v %v", s, err)
		}
		for _, cmd := range []any{Settle{Receipt: "X"}, Accept{}} {
			if _, err := Apply(s, cmd); !errors.Is(err, ErrDuplicate) {
				t.Fatalf("%T after COMPLETE: %v", cmd, err)
			}
		}
		var te TransitionError
		if _, err := Apply(s, Fail{Code: "1"}); !errors.As(err, &te) || te.From != StateComplete {
			t.Fatalf("fail after COMPLETE: %v", err)
		}
	})
	t.Run("FailFromPending", func(t *testing.T) {
		s, err := Apply(created(t), Fail{Code: "1032", Reason: "Request cancelled by user", At: at})
		if err != nil || s.State != StateFailed || s.FailedCode != "1032" || s.FailedReason == "" {
			t.Fatalf("%+v %v", s, err)
		}
		if _, err := Apply(s, Accept{}); !errors.Is(err, ErrDuplicate) {
			t.Fatalf("late accept: %v", err)
		}
		var te TransitionError
		if _, err := Apply(s, Settle{}); !errors.As(err, &te) {
			t.Fatalf("settle after FAILED: %v", err)
		}
	})
	t.Run("UnknownInvoice", func(t *testing.T) {
		if _, err := Apply(State{}, Settle{}); !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
	})
}

// Every pair of states is either allowed by the table or refused by Apply.
func TestTransitionsExhaustive(t *testing.T) {
	t.Parallel()
	states := []string{StatePending, StateProcessing, StateComplete, StateFailed}
	cmdTo := map[string]any{StateProcessing: Accept{}, StateComplete: Settle{Receipt: "R"}, StateFailed: Fail{Code: "1"}}
	for _, from := range states {
		for to, cmd := range cmdTo {
			s := created(t)
			s.State = from
			n, err := Apply(s, cmd)
			if CanMove(from, to) {
				if err != nil || n.State != to {
					t.Errorf("%s -> %s allowed but Apply gave %v (%s)", from, to, err, n.State)
				}
			} else if err == nil {
				t.Errorf("%s -> %s not allowed but Apply accepted it", from, to)
			}
		}
	}
}

// An unknown outcome keeps the invoice waiting in PROCESSING: the true callback (or
// the status query) still completes or fails it, and a repeat changes nothing.
func TestApply_UnknownOutcome(t *testing.T) {
	t.Parallel()
	at := time.Unix(2, 0)
	t.Run("UnknownThenSettle", func(t *testing.T) {
		s, err := Apply(created(t), Unknown{Reason: "timeout after send", At: at})
		if err != nil || s.State != StateProcessing || !s.OutcomeUnknown || s.CheckoutRequestID != "" || s.Version != 2 {
			t.Fatalf("unknown: %+v %v", s, err)
		}
		if _, err := Apply(s, Unknown{At: at}); !errors.Is(err, ErrDuplicate) {
			t.Fatalf("second unknown: %v", err)
		}
		paid := money.MustParse("100")
		n, err := Apply(s, Settle{Receipt: "RKT1", CheckoutRequestID: "ws_CO_1", Paid: &paid, Cleared: true, At: at})
		if err != nil || n.State != StateComplete || n.MpesaReference != "RKT1" || n.CheckoutRequestID != "ws_CO_1" || n.Held {
			t.Fatalf("settle after unknown: %+v %v", n, err)
		}
	})
	t.Run("UnknownWithReferenceThenFail", func(t *testing.T) {
		s, err := Apply(created(t), Unknown{CheckoutRequestID: "ws_CO_2", At: at})
		if err != nil || s.CheckoutRequestID != "ws_CO_2" {
			t.Fatalf("unknown: %+v %v", s, err)
		}
		s, err = Apply(s, Fail{Code: "1032", At: at})
		if err != nil || s.State != StateFailed || s.CheckoutRequestID != "ws_CO_2" {
			t.Fatalf("fail after unknown: %+v %v", s, err)
		}
	})
	t.Run("UnknownAfterFinal", func(t *testing.T) {
		s, _ := Apply(created(t), Settle{Receipt: "R", At: at})
		if n, err := Apply(s, Unknown{At: at}); !errors.Is(err, ErrDuplicate) || n.OutcomeUnknown {
			t.Fatalf("unknown after COMPLETE: %+v %v", n, err)
		}
	})
}

// A success whose paid amount differs from the invoice is held: not COMPLETE (so
// nothing is credited), PROCESSING, and deaf to later provider results.
func TestApply_PaidAmountMismatch(t *testing.T) {
	t.Parallel()
	at := time.Unix(2, 0)
	for _, from := range []string{StatePending, StateProcessing} {
		t.Run("HeldFrom"+from, func(t *testing.T) {
			s := created(t)
			s.State = from
			paid := money.MustParse("10.00")
			n, err := Apply(s, Settle{Receipt: "RKT9", CheckoutRequestID: "ws_CO_9", Paid: &paid, Cleared: true, At: at})
			if err != nil || n.State != StateProcessing || !n.Held || n.PaidAmount == nil || !n.PaidAmount.Equal(paid) ||
				n.MpesaReference != "RKT9" || n.Version != s.Version+1 {
				t.Fatalf("%+v %v", n, err)
			}
			same := money.MustParse("100")
			for _, cmd := range []any{Settle{Receipt: "RKT9", Paid: &same}, Settle{Receipt: "X"}, Fail{Code: "1"}, Unknown{}} {
				if m, err := Apply(n, cmd); err == nil || m.State != StateProcessing || m.Version != n.Version {
					t.Fatalf("%T moved a held invoice: %+v %v", cmd, m, err)
				}
			}
		})
	}
	t.Run("SameAmountOtherScale", func(t *testing.T) {
		paid := money.MustParse("100")
		n, err := Apply(created(t), Settle{Receipt: "R", Paid: &paid, At: at})
		if err != nil || n.State != StateComplete || n.Held {
			t.Fatalf("%+v %v", n, err)
		}
	})
	t.Run("AfterComplete", func(t *testing.T) {
		s, _ := Apply(created(t), Settle{Receipt: "R", At: at})
		paid := money.MustParse("1.00")
		if n, err := Apply(s, Settle{Receipt: "R", Paid: &paid}); !errors.Is(err, ErrDuplicate) || n.Held {
			t.Fatalf("%+v %v", n, err)
		}
	})
	t.Run("AfterFailed", func(t *testing.T) {
		s, _ := Apply(created(t), Fail{Code: "1032", At: at})
		paid := money.MustParse("1.00")
		var te TransitionError
		if _, err := Apply(s, Settle{Receipt: "R", Paid: &paid}); !errors.As(err, &te) {
			t.Fatal(err)
		}
	})
}
