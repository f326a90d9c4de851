package api_test

import (
	"context"
	"testing"
	"time"

	"paysvc/actors/aggregates/invoice/invoicestore"
	"paysvc/cmd/paysvc/service"
)

// A live server with Daraja credentials sends prompts through Daraja (here its local
// fake, over real HTTP), learns outcomes from Daraja's callbacks at the secret
// callback URL, and recovers a lost callback with the status query.
func TestSTKPush_LiveDaraja(t *testing.T) {
	t.Parallel()
	const token = "cb-secret-123"
	env, fake, _ := startDaraja(t, daraja{token: token, live: true}, func(c *service.Config) {
		// Long enough that a callback sent at once always lands before the status
		// query (on a loaded CI machine 300 ms was not: the query, which carries no
		// receipt number, completed CallbackCompletes' invoice first), short enough
		// for LostCallbackRecoveredByQuery to wait on it.
		c.DarajaQueryAfter = 3 * time.Second
	})
	b := newBundle(t, env, "Live Merchant")

	push := func(phone string) (invoiceID, checkoutID string) {
		t.Helper()
		r := b.post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": phone, "amount": "1000"})
		if r.Status != 200 {
			t.Fatalf("push: %d %s", r.Status, r.Body)
		}
		invoiceID = r.Map(t)["invoice"].(map[string]any)["invoice_id"].(string)
		return invoiceID, promptTo(t, fake, phone, recordedFor(t, env, invoiceID)).CheckoutRequestID
	}

	t.Run("AcceptedPromptIsProcessing", func(t *testing.T) {
		// Daraja answered ResponseCode 0 (request accepted for processing): the invoice
		// is PROCESSING, as a sandbox invoice is once its prompt is accepted, and not
		// flagged unknown. The reference is recorded in the same change, so the state
		// is already there when push returns.
		inv, co := push("254712000004")
		r := b.post("/api/v1/payment/status/", map[string]any{"invoice_id": inv})
		if r.Status != 200 {
			t.Fatalf("status: %d %s", r.Status, r.Body)
		}
		if st := r.Map(t)["invoice"].(map[string]any); st["state"] != "PROCESSING" {
			t.Fatalf("invoice after Daraja accepted the prompt: %v, want PROCESSING", st)
		}
		if st, err := invoicestore.Get(context.Background(), env.Schema.DB, b.merchant, inv); err != nil || st.OutcomeUnknown {
			t.Fatalf("invoice %+v (%v): an accepted prompt is not an unknown outcome", st, err)
		}
		// The customer then cancels: PROCESSING -> FAILED (nothing credited, so the
		// balances the next subtests check are untouched).
		if err := fake.Complete(co, 1032, ""); err != nil {
			t.Fatal(err)
		}
		if final := b.waitInvoice(t, inv); final["state"] != "FAILED" || final["failed_code"] != "1032" {
			t.Fatalf("%v", final)
		}
	})
	t.Run("CallbackCompletes", func(t *testing.T) {
		inv, co := push("254712000001")
		if err := fake.Complete(co, 0, "RKT1234567"); err != nil {
			t.Fatal(err)
		}
		final := b.waitInvoice(t, inv)
		if final["state"] != "COMPLETE" || final["mpesa_reference"] != "RKT1234567" {
			t.Fatalf("%v", final)
		}
		if cur, _ := b.balance(t, b.settlement); cur != "985.00" {
			t.Fatalf("wallet %s, want 985.00", cur)
		}
		// Daraja delivers the same callback again: one effect.
		if err := fake.Complete(co, 0, "RKT1234567"); err != nil {
			t.Fatal(err)
		}
		b.wallet(t, "KES", "Marker") // a later command of the merchant, applied after the callback
		if cur, _ := b.balance(t, b.settlement); cur != "985.00" {
			t.Fatalf("a repeated callback moved money: %s", cur)
		}
	})
	t.Run("CallbackCancelled", func(t *testing.T) {
		inv, co := push("254712000002")
		if err := fake.Complete(co, 1032, ""); err != nil {
			t.Fatal(err)
		}
		final := b.waitInvoice(t, inv)
		if final["state"] != "FAILED" || final["failed_code"] != "1032" {
			t.Fatalf("%v", final)
		}
	})
	t.Run("LostCallbackRecoveredByQuery", func(t *testing.T) {
		before, _ := b.balance(t, b.settlement)
		inv, co := push("254712000003")
		if err := fake.Lose(co, 0, "RKT7654321"); err != nil {
			t.Fatal(err)
		}
		final := b.waitInvoice(t, inv)
		if final["state"] != "COMPLETE" || fake.Queries() == 0 {
			t.Fatalf("%v (queries %d)", final, fake.Queries())
		}
		if after, _ := b.balance(t, b.settlement); after == before {
			t.Fatalf("the recovered collection did not credit the wallet (%s)", after)
		}
	})
	t.Run("CallbackEndpointRefusals", func(t *testing.T) {
		if r := env.Do("POST", "/api/v1/payment/mpesa/callback/wrong-token", `{}`); r.Status != 404 {
			t.Fatalf("wrong token: %d %s", r.Status, r.Body)
		}
		r := env.Do("POST", "/api/v1/payment/mpesa/callback/"+token, `{"Body":{}}`)
		if r.Status != 400 {
			t.Fatalf("malformed callback: %d %s", r.Status, r.Body)
		}
		errorBody(t, r)
	})
}

// A sandbox server whose M-Pesa goes through Daraja still simulates the card and
// PesaLink rails: each rail is wired on its own, so its card and
// PesaLink collections get their outcomes.
func TestSandboxWithDaraja_CardAndPesaLinkComplete(t *testing.T) {
	t.Parallel()
	env, _, _ := startDaraja(t, daraja{token: "cb-token"}, nil)
	b := newBundle(t, env, "Sandbox With Daraja")
	r := b.post("/api/v1/payment/card/", map[string]any{"card_number": "4242424242424242", "expiry": "12/39", "cvv": "123",
		"amount": "1000", "currency": "KES", "api_ref": "card-daraja"})
	if r.Status != 200 {
		t.Fatalf("card payment: %d %s", r.Status, r.Body)
	}
	if inv := b.waitInvoice(t, r.Map(t)["invoice"].(map[string]any)["id"].(string)); inv["state"] != "COMPLETE" {
		t.Fatalf("card collection on a sandbox server with Daraja: %v", inv)
	}
	r = b.post("/api/v1/payment/collection/", map[string]any{"method": "PESALINK", "currency": "KES", "amount": "500",
		"api_ref": "pesalink-daraja", "first_name": "Jane", "last_name": "Doe", "email": "jane@example.com"})
	if r.Status != 200 {
		t.Fatalf("PesaLink collection: %d %s", r.Status, r.Body)
	}
	if inv := b.waitInvoice(t, r.Map(t)["invoice"].(map[string]any)["id"].(string)); inv["state"] != "COMPLETE" {
		t.Fatalf("PesaLink collection on a sandbox server with Daraja: %v", inv)
	}
}
