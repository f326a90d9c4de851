package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"paysvc/actors/aggregates/invoice"
	"paysvc/actors/aggregates/invoice/invoicestore"
	"paysvc/actors/rails/mpesa"
	"paysvc/actors/rails/mpesa/mpesatest"
	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage"
)

// stkLive is a live server whose M-Pesa is the wire-level fake Daraja.
type stkLive struct {
	*bundle
	fake  *mpesatest.FakeDaraja
	token string
}

func startSTKLive(t *testing.T, mutate func(*service.Config)) *stkLive {
	t.Helper()
	const token = "cb-secret-proof-0123456789abcdef0123"
	env, fake, _ := startDaraja(t, daraja{token: token, live: true}, func(c *service.Config) {
		// The rails role's own status query of stale prompts stays out of the way:
		// what changes an invoice here is the callback alone.
		c.DarajaQueryAfter = time.Hour
		if mutate != nil {
			mutate(c)
		}
	})
	return &stkLive{bundle: newBundle(t, env, "Proof Merchant"), fake: fake, token: token}
}

// push asks for 1000 from phone and returns the invoice and its prompt once Daraja
// took it and the invoice records it (PROCESSING).
func (l *stkLive) push(t *testing.T, phone string) (string, mpesatest.FakeSTKRequest) {
	t.Helper()
	r := l.post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": phone, "amount": "1000"})
	if r.Status != 200 {
		t.Fatalf("push: %d %s", r.Status, r.Body)
	}
	id := r.Map(t)["invoice"].(map[string]any)["invoice_id"].(string)
	return id, promptTo(t, l.fake, phone, recordedFor(t, l.env, id))
}

// settled waits until every command the merchant had issued is applied (a later
// command of the same merchant), and returns the invoice.
func (l *stkLive) settled(t *testing.T, id string) invoice.State {
	t.Helper()
	l.wallet(t, "KES", "Marker "+id)
	st, err := invoicestore.Get(context.Background(), l.env.Schema.DB, l.merchant, id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// A leaked callback token is not enough to complete an invoice: a success posted
// with the right token but without the prompt's MAC (or with a wrong one) credits
// nothing unless Daraja's status query confirms it; Daraja's own callback (which
// carries the MAC) still credits.
func TestSTKCallbackNeedsSecondProof(t *testing.T) {
	t.Parallel()
	l := startSTKLive(t, nil)
	base := "/api/v1/payment/mpesa/callback/" + l.token

	t.Run("GenuineCallbackCarriesTheMACAndCredits", func(t *testing.T) {
		inv, p := l.push(t, "254712100001")
		// The prompt's own URL: token, invoice, then its MAC.
		tail := strings.TrimPrefix(p.CallBackURL, l.env.BaseURL+base+"/")
		parts := strings.Split(tail, "/")
		if len(parts) != 2 || parts[0] != inv || len(parts[1]) != 32 {
			t.Fatalf("callback URL %q: want .../%s/<MAC>", p.CallBackURL, inv)
		}
		if err := l.fake.Complete(p.CheckoutRequestID, 0, "RKTGENUINE1"); err != nil {
			t.Fatal(err)
		}
		if final := l.waitInvoice(t, inv); final["state"] != "COMPLETE" {
			t.Fatalf("genuine callback: %v", final)
		}
		if cur, _ := l.balance(t, l.settlement); cur != "985.00" {
			t.Fatalf("wallet %s, want 985.00", cur)
		}
	})

	forge := func(t *testing.T, path string, body []byte) {
		t.Helper()
		// Daraja is answered as always: a forger learns nothing from the answer.
		if r := l.env.Do("POST", path, string(body)); r.Status != 200 {
			t.Fatalf("forged callback to %s: %d %s", path, r.Status, r.Body)
		}
	}
	unchanged := func(t *testing.T, inv string) {
		t.Helper()
		if st := l.settled(t, inv); st.State != invoice.StateProcessing || st.MpesaReference != "" {
			t.Fatalf("after forged successes the invoice is %s (receipt %q), want PROCESSING", st.State, st.MpesaReference)
		}
		if cur, _ := l.balance(t, l.settlement); cur != "985.00" {
			t.Fatalf("a forged callback moved money: wallet %s", cur)
		}
	}

	t.Run("ForgedWhileThePromptIsPending", func(t *testing.T) {
		inv, p := l.push(t, "254712100002")
		body, err := l.fake.CallbackBody(p.CheckoutRequestID, 0, "RKTFORGED01")
		if err != nil {
			t.Fatal(err)
		}
		forge(t, base+"/"+inv, body)                                     // no MAC
		forge(t, base+"/"+inv+"/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", body) // a wrong MAC
		forge(t, base, body)                                             // by CheckoutRequestID alone
		unchanged(t, inv)
		if l.fake.Queries() == 0 {
			t.Fatal("no status query was asked for a callback without a valid MAC")
		}
	})

	t.Run("ForgedWhenDarajaSaysNotPaid", func(t *testing.T) {
		inv, p := l.push(t, "254712100003")
		// The customer cancelled: Daraja knows (its status query says 1032), the
		// callback is still on its way, and a forger posts a success first.
		if err := l.fake.Lose(p.CheckoutRequestID, mpesa.CodeCancelled, ""); err != nil {
			t.Fatal(err)
		}
		body, err := l.fake.CallbackBody(p.CheckoutRequestID, 0, "RKTFORGED02")
		if err != nil {
			t.Fatal(err)
		}
		// Another invoice's MAC is not this one's.
		_, other := l.push(t, "254712100004")
		otherMAC := other.CallBackURL[strings.LastIndexByte(other.CallBackURL, '/')+1:]
		forge(t, base+"/"+inv+"/"+otherMAC, body)
		forge(t, base+"/"+inv, body)
		unchanged(t, inv)
	})

	t.Run("WithoutMACDarajaAgreeingCredits", func(t *testing.T) {
		// A prompt sent before MACs existed gets its callback at the URL without one;
		// Daraja's status query agrees it was paid, so it credits.
		inv, p := l.push(t, "254712100005")
		if err := l.fake.Lose(p.CheckoutRequestID, 0, "RKTOLDPROMPT"); err != nil {
			t.Fatal(err)
		}
		body, err := l.fake.CallbackBody(p.CheckoutRequestID, 0, "RKTOLDPROMPT")
		if err != nil {
			t.Fatal(err)
		}
		forge(t, base+"/"+inv, body)
		if final := l.waitInvoice(t, inv); final["state"] != "COMPLETE" || final["mpesa_reference"] != "RKTOLDPROMPT" {
			t.Fatalf("confirmed callback: %v", final)
		}
		if cur, _ := l.balance(t, l.settlement); cur != "1970.00" {
			t.Fatalf("wallet %s, want 1970.00", cur)
		}
	})
	ledgerOK(t, l.bundle)
	if strings.Contains(l.env.Logs.String(), l.token) {
		t.Fatal("the callback token reached the log")
	}
}

// A prompt queued before its merchant was disabled is not sent: the rails role
// reads enabled when it sends, fails the invoice at once (not left waiting for a
// prompt that never comes), and Daraja sees nothing. Enabled again, the merchant's
// new prompts go out.
func TestSTKPromptOfDisabledMerchantNotSent(t *testing.T) {
	t.Parallel()
	// No rails role yet: the prompts wait in their topic.
	l := startSTKLive(t, func(c *service.Config) {
		c.Roles = []string{service.RoleAPI, service.RoleEngine, service.RoleRelay, service.RoleDispatcher}
		c.HTTPAddr = "127.0.0.1:0" // so the rails peer started below can listen too (no callback comes here)
	})
	var queued []string
	for _, phone := range []string{"254712200001", "254712200002"} {
		r := l.post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": phone, "amount": "1000"})
		if r.Status != 200 {
			t.Fatalf("push: %d %s", r.Status, r.Body)
		}
		queued = append(queued, r.Map(t)["invoice"].(map[string]any)["invoice_id"].(string))
	}
	ctx := context.Background()
	if ok, err := storage.SetMerchantEnabled(ctx, l.env.Schema.DB, l.merchant, false); err != nil || !ok {
		t.Fatalf("disable: %v %v", ok, err)
	}
	servicetest.StartPeer(t, l.env, "live", service.RoleRails)

	for _, id := range queued {
		waittest.Eventually(t, 20*time.Second, func() (bool, string) {
			st, err := invoicestore.Get(ctx, l.env.Schema.DB, l.merchant, id)
			if err != nil {
				t.Fatal(err)
			}
			if st.State == invoice.StateFailed && !strings.Contains(st.FailedReason, "disabled") {
				t.Fatalf("failed invoice %s: reason %q", id, st.FailedReason)
			}
			return st.State == invoice.StateFailed, fmt.Sprintf("the queued prompt's invoice %s is %s, want FAILED", id, st.State)
		})
	}
	if n := len(l.fake.Requests()); n != 0 {
		t.Fatalf("Daraja received %d prompts of a disabled merchant", n)
	}

	if _, err := storage.SetMerchantEnabled(ctx, l.env.Schema.DB, l.merchant, true); err != nil {
		t.Fatal(err)
	}
	// The engine reads enabled again within its cache's lifetime: retry until it does.
	waittest.Eventually(t, 20*time.Second, func() (bool, string) {
		r := l.post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254712200003", "amount": "1000"})
		return r.Status == 200, fmt.Sprintf("push after enable: %d %s", r.Status, r.Body)
	})
	waittest.Eventually(t, 20*time.Second, func() (bool, string) {
		return len(l.fake.Requests()) > 0, "the enabled merchant's prompt never reached Daraja"
	})
	if reqs := l.fake.Requests(); len(reqs) != 1 || reqs[0].PhoneNumber != "254712200003" {
		t.Fatalf("Daraja received %+v, want only the prompt made after enable", reqs)
	}
}
