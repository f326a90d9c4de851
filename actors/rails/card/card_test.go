package card_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"paysvc/actors/rails/card"
	"paysvc/actors/rails/mpesa"
	"paysvc/actors/values/money"
	"paysvc/actors/values/waittest"
	"paysvc/topics"
)

// The sandbox card rail answers each charge with the outcome its test card
// stands for; a charge that carries no outcome, or one the sandbox does not
// know, is declined: an absent answer is never an approval.
func TestSimulatorOutcomes(t *testing.T) {
	var mu sync.Mutex
	got := map[string]mpesa.Result{}
	sim := card.NewSimulator(func(_ context.Context, r mpesa.Result) error {
		mu.Lock()
		defer mu.Unlock()
		got[r.InvoiceID] = r
		return nil
	}, time.Millisecond)
	defer sim.Close()
	want := map[string]int{
		card.OutcomeSuccess:           card.CodeApproved,
		card.OutcomeDeclined:          card.CodeDoNotHonour,
		card.OutcomeInsufficientFunds: card.CodeInsufficientFunds,
		card.OutcomeExpired:           card.CodeExpired,
		"":                            card.CodeDoNotHonour,
		"approved-please":             card.CodeDoNotHonour,
	}
	for outcome := range want {
		if err := sim.Charge(context.Background(), topics.CardRequest{InvoiceID: "INV-" + outcome, MerchantID: "M1",
			Amount: money.MustParse("10.00"), Currency: "KES", TestOutcome: outcome}); err != nil {
			t.Fatal(err)
		}
	}
	waittest.Eventually(t, 10*time.Second, func() (bool, string) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		return n == len(want), fmt.Sprintf("%d outcomes of %d charges", n, len(want))
	})
	for outcome, code := range want {
		r := got["INV-"+outcome]
		if r.Code != code || r.Stage != mpesa.StageFinal || (code == card.CodeApproved) != (r.Receipt != "") {
			t.Errorf("outcome %q: %+v, want code %d", outcome, r, code)
		}
	}
}
