package api_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"paysvc/actors/aggregates/invoice/invoicestore"
	"paysvc/actors/rails/mpesa/mpesatest"
	"paysvc/actors/values/money"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage"
)

// liveDaraja is a live server whose M-Pesa rail is the fake Daraja.
type liveDaraja struct {
	*bundle
	fake    *mpesatest.FakeDaraja
	markers int
}

func setupLiveDaraja(t *testing.T) *liveDaraja {
	t.Helper()
	env, fake, _ := startDaraja(t, daraja{token: "cb-secret-unknown-outcomes-0123456789", live: true}, func(c *service.Config) {
		// As in TestSTKPush_LiveDaraja: the callbacks must land before the status
		// query, which carries no receipt number, on a loaded machine too.
		c.DarajaQueryAfter = 3 * time.Second
	})
	return &liveDaraja{bundle: newBundle(t, env, "Live Merchant"), fake: fake}
}

// push asks for 1000 from phone and returns the invoice and the prompt Daraja
// took (found by phone: its reference may never have been recorded).
func (l *liveDaraja) push(t *testing.T, phone string) (invoiceID string, prompt mpesatest.FakeSTKRequest) {
	t.Helper()
	r := l.post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": phone, "amount": "1000"})
	if r.Status != 200 {
		t.Fatalf("push: %d %s", r.Status, r.Body)
	}
	invoiceID = r.Map(t)["invoice"].(map[string]any)["invoice_id"].(string)
	return invoiceID, promptTo(t, l.fake, phone, nil)
}

// waitState polls the invoice until it is in state.
func (l *liveDaraja) waitState(t *testing.T, id, state string) map[string]any {
	t.Helper()
	m := statusUntil(t, l.env, 20*time.Second, map[string]any{"invoice_id": id},
		func(inv map[string]any) bool { return inv["state"] == state }, servicetest.Bearer(l.secret)...)
	return m["invoice"].(map[string]any)
}

func (l *liveDaraja) current(t *testing.T) money.Amount {
	t.Helper()
	cur, _ := l.balance(t, l.settlement)
	return money.MustParse(cur)
}

// settled waits until the merchant's later command (a marker wallet) is applied:
// everything produced before it for this merchant (callbacks included) is too.
func (l *liveDaraja) settled(t *testing.T) {
	l.markers++
	l.wallet(t, "KES", "Marker "+strconv.Itoa(l.markers))
}

// An STK push whose outcome is unknown is not FAILED: the invoice waits in
// PROCESSING and the true outcome (the callback, or the status query when the
// answer named the prompt) completes it, crediting the wallet exactly once.
func TestSTKPush_LiveDaraja_UnknownOutcome(t *testing.T) {
	t.Parallel()
	l := setupLiveDaraja(t)
	net985 := money.MustParse("985.00")

	for i, c := range []struct {
		name  string
		fault mpesatest.PushFault
	}{
		{"TimeoutAfterSend_CallbackCompletes", mpesatest.FaultDropAnswer},
		{"GarbageAnswer_CallbackCompletes", mpesatest.FaultGarbage},
		{"NoCheckoutRequestID_CallbackCompletes", mpesatest.FaultNoCheckoutID},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := l.current(t)
			l.fake.FaultNextPush(c.fault)
			inv, prompt := l.push(t, "25471300000"+string(rune('1'+i)))
			l.waitState(t, inv, "PROCESSING")
			if _, err := storage.InvoiceByCheckoutRequest(context.Background(), l.env.Schema.DB, prompt.CheckoutRequestID); err == nil {
				t.Fatal("a reference the answer never named was recorded")
			}
			if err := l.fake.Complete(prompt.CheckoutRequestID, 0, "RKU000000"+string(rune('1'+i))); err != nil {
				t.Fatal(err)
			}
			final := l.waitState(t, inv, "COMPLETE")
			if final["mpesa_reference"] != "RKU000000"+string(rune('1'+i)) {
				t.Fatalf("%v", final)
			}
			// Daraja delivers the callback again: still one credit.
			if err := l.fake.Complete(prompt.CheckoutRequestID, 0, "RKU000000"+string(rune('1'+i))); err != nil {
				t.Fatal(err)
			}
			l.settled(t)
			if got := l.current(t); !got.Equal(before.Add(net985)) {
				t.Fatalf("wallet %s, want %s + 985.00 (one credit)", got, before)
			}
			ledgerOK(t, l.bundle)
		})
	}
	t.Run("CutAnswerNamingThePrompt_QueryCompletes", func(t *testing.T) {
		before := l.current(t)
		l.fake.FaultNextPush(mpesatest.FaultCutAnswer)
		inv, prompt := l.push(t, "254713000009")
		l.waitState(t, inv, "PROCESSING")
		if err := l.fake.Lose(prompt.CheckoutRequestID, 0, "RKU0000009"); err != nil { // no callback: only the query can tell
			t.Fatal(err)
		}
		l.waitState(t, inv, "COMPLETE")
		if l.fake.Queries() == 0 {
			t.Fatal("completed without a status query")
		}
		l.settled(t)
		if got := l.current(t); !got.Equal(before.Add(net985)) {
			t.Fatalf("wallet %s, want %s + 985.00", got, before)
		}
		ledgerOK(t, l.bundle)
	})
	t.Run("CertainlyUnsentIsRetried", func(t *testing.T) {
		l.fake.FailNextPush(http.StatusTooManyRequests, "", "") // rate limited: not processed
		inv, prompt := l.push(t, "254713000010")
		if err := l.fake.Complete(prompt.CheckoutRequestID, 0, "RKU0000010"); err != nil {
			t.Fatal(err)
		}
		l.waitState(t, inv, "COMPLETE")
		n := 0
		for _, r := range l.fake.Requests() {
			if r.PhoneNumber == "254713000010" {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("Daraja took %d prompts, want 1", n)
		}
		l.settled(t)
		ledgerOK(t, l.bundle)
	})
}

// A success callback whose paid Amount differs from the invoice credits nothing:
// the invoice is held in PROCESSING, the mismatch is counted, and neither a later
// correct callback nor the status query completes it.
func TestSTKPush_LiveDaraja_AmountMismatch(t *testing.T) {
	t.Parallel()
	l := setupLiveDaraja(t)
	mismatches := func() float64 {
		fams, err := prometheus.DefaultGatherer.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() == "paysvc_mpesa_callback_amount_mismatch_total" {
				return f.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return 0
	}
	before, counted := l.current(t), mismatches()
	inv, prompt := l.push(t, "254713000020")
	if err := l.fake.CompletePaid(prompt.CheckoutRequestID, "RKM0000001", "10"); err != nil {
		t.Fatal(err)
	}
	l.waitState(t, inv, "PROCESSING")
	if got := mismatches() - counted; got != 1 {
		t.Fatalf("amount mismatches counted %v, want 1", got)
	}
	// The same prompt's callback again, now with the right amount: nothing changes.
	if err := l.fake.Complete(prompt.CheckoutRequestID, 0, "RKM0000001"); err != nil {
		t.Fatal(err)
	}
	l.settled(t)
	st, err := invoicestore.Get(context.Background(), l.env.Schema.DB, l.merchant, inv)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != "PROCESSING" || !st.Held || st.PaidAmount == nil || !st.PaidAmount.Equal(money.MustParse("10")) || st.MpesaReference != "RKM0000001" {
		t.Fatalf("invoice %+v, want held in PROCESSING with the paid amount", st)
	}
	if got := l.current(t); !got.Equal(before) {
		t.Fatalf("wallet %s, want %s: a mismatched payment was credited", got, before)
	}
}
