package api_test

import (
	"strings"
	"testing"
	"time"

	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

func TestCardPayment(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) { c.CardClearingDelay = 400 * time.Millisecond })
	b := newBundle(t, env, "Cards")
	pay := func(pan string, extra map[string]any) map[string]any {
		t.Helper()
		body := map[string]any{"card_number": pan, "expiry": "12/39", "cvv": "123", "amount": "1000", "currency": "KES", "api_ref": "card-1"}
		for k, v := range extra {
			body[k] = v
		}
		r := b.post("/api/v1/payment/card/", body)
		if r.Status != 200 {
			t.Fatalf("card payment: %d %s", r.Status, r.Body)
		}
		return r.Map(t)
	}

	t.Run("ApprovedThenCleared", func(t *testing.T) {
		m := pay("4242 4242 4242 4242", nil)
		inv := m["invoice"].(map[string]any)
		if inv["provider"] != "CARD" || inv["charges"] != "35.00" || inv["net_amount"] != "965.00" ||
			m["card"].(map[string]any)["last4"] != "4242" || m["card"].(map[string]any)["network"] != "VISA" {
			t.Fatalf("%v", m)
		}
		final := b.waitInvoice(t, inv["id"].(string))
		if final["state"] != "COMPLETE" {
			t.Fatalf("%v", final)
		}
		// Booked at once, available once cleared.
		cur, avail := b.balance(t, b.settlement)
		if cur != "965.00" || (avail != "0.00" && avail != "965.00") {
			t.Fatalf("after completion %s/%s", cur, avail)
		}
		waittest.Eventually(t, 10*time.Second, func() (bool, string) {
			_, avail = b.balance(t, b.settlement)
			return avail == "965.00", "card funds never cleared (available " + avail + ")"
		})
		st := b.post("/api/v1/payment/status/", map[string]any{"invoice_id": inv["id"]}).Map(t)["invoice"].(map[string]any)
		if st["clearing_status"] != "AVAILABLE" {
			t.Fatalf("clearing_status %v", st["clearing_status"])
		}
		// Cleared: nothing of it is held any more.
		checkLedger(t, env)
	})
	t.Run("UnclearedFundsCannotBeMoved", func(t *testing.T) {
		env2 := servicetest.Start(t, func(c *service.Config) { c.CardClearingDelay = time.Hour })
		b2 := newBundle(t, env2, "Slow clearing")
		w := b2.wallet(t, "KES", "Dest")
		r := b2.post("/api/v1/payment/card/", map[string]any{"card_number": "4242424242424242", "expiry": "12/39", "cvv": "123",
			"amount": "100", "currency": "KES"})
		b2.waitInvoice(t, r.Map(t)["invoice"].(map[string]any)["id"].(string))
		if cur, avail := b2.balance(t, b2.settlement); cur != "96.50" || avail != "0.00" {
			t.Fatalf("uncleared card funds: %s/%s", cur, avail)
		}
		if r := b2.transfer(b2.settlement, w, "1.00"); r.Status != 400 {
			t.Fatalf("moving uncleared funds: %d %s", r.Status, r.Body)
		}
		// The 96.50 out of available is the uncleared collection's: an open hold.
		checkLedger(t, env2)
	})
	t.Run("Declined", func(t *testing.T) {
		m := pay("4000000000000002", nil)
		final := b.waitInvoice(t, m["invoice"].(map[string]any)["id"].(string))
		if final["state"] != "FAILED" || final["failed_code"] != "5" {
			t.Fatalf("%v", final)
		}
	})
	t.Run("Validation", func(t *testing.T) {
		for _, tc := range []struct {
			body map[string]any
			attr string
		}{
			{map[string]any{"card_number": "4242424242424241", "expiry": "12/39", "cvv": "123", "amount": "10", "currency": "KES"}, "card_number"},
			{map[string]any{"card_number": "4242424242424242", "expiry": "01/20", "cvv": "123", "amount": "10", "currency": "KES"}, "expiry"},
			{map[string]any{"card_number": "4242424242424242", "expiry": "13/39", "cvv": "123", "amount": "10", "currency": "KES"}, "expiry"},
			{map[string]any{"card_number": "4242424242424242", "expiry": "12/39", "cvv": "12", "amount": "10", "currency": "KES"}, "cvv"},
			{map[string]any{"card_number": "4242424242424242", "expiry": "12/39", "cvv": "123", "currency": "KES"}, "amount"},
		} {
			r := b.post("/api/v1/payment/card/", tc.body)
			if _, _, attr := errorBody(t, r); r.Status != 400 || attr != tc.attr {
				t.Errorf("%v: %d %s (want 400 on %s)", tc.body, r.Status, r.Body, tc.attr)
			}
		}
	})
	t.Run("CardNumberNeverKept", func(t *testing.T) {
		for _, q := range []string{
			`SELECT count(*) FROM invoices WHERE data::text LIKE '%4242424242424242%' OR data::text LIKE '%4000000000000002%'`,
			`SELECT count(*) FROM processed_commands WHERE convert_from(reply, 'UTF8') LIKE '%42424242424242%'`,
			`SELECT count(*) FROM ledger_entries WHERE narrative LIKE '%42424242424242%'`,
		} {
			var n int
			if err := env.Schema.DB.Get(&n, q); err != nil || n != 0 {
				t.Fatalf("%s: %d (%v)", q, n, err)
			}
		}
		if strings.Contains(env.Logs.String(), "4242424242424242") || strings.Contains(env.Logs.String(), "4242 4242") {
			t.Fatal("a card number reached the logs")
		}
	})
	// Every payment above has its outcome (waited for): the approved one cleared,
	// the declined one moved nothing.
	checkLedger(t, env)
}
