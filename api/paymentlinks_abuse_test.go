package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"paysvc/actors/rails/mpesa/mpesatest"
	"paysvc/actors/values/waittest"
	"paysvc/api"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage"
)

// linkPay opens a session of a link and pays it by M-Pesa as the page does, from
// the client address xff (believed from the test's trusted proxy; "" for none). It
// returns the answers of both steps.
func linkPay(env *servicetest.Env, linkID, xff, phone string, amount any) (sess, pay servicetest.Response) {
	var h []string
	if xff != "" {
		h = []string{"X-Forwarded-For", xff}
	}
	sess = env.Do("POST", "/pay/"+linkID+"/session/", map[string]any{}, h...)
	if sess.Status != 200 {
		return sess, servicetest.Response{}
	}
	var s map[string]any
	if err := json.Unmarshal(sess.Body, &s); err != nil {
		return sess, servicetest.Response{}
	}
	pay = env.Do("POST", "/api/v1/payment/collection/", map[string]any{"method": "M-PESA", "currency": "KES", "amount": amount,
		"api_ref": "link", "phone_number": phone, "checkout_id": s["checkout_id"], "signature": s["signature"]}, h...)
	return sess, pay
}

// promptOf waits for the fake Daraja to have taken a prompt to phone.
func promptOf(t *testing.T, fake *mpesatest.FakeDaraja, phone string) mpesatest.FakeSTKRequest {
	t.Helper()
	return promptTo(t, fake, phone, nil)
}

// 100 abusive customers each open a session of a 100-use link and start a prompt
// that Daraja accepts and nobody ever answers. They hold every use only for the
// bounded holds (here shortened): then a genuine payer pays. An abusive prompt
// whose success comes after its hold is still credited and counted: the link is
// then over its limit, as docs/api-decisions.md says.
func TestPaymentLinkAbusiveSessionsCannotLockLink(t *testing.T) {
	t.Parallel()
	holds := storage.LinkHolds{Send: 2 * time.Second, Accepted: 2 * time.Second}
	env, fake, _ := startDaraja(t, daraja{token: "cb-secret-links-abuse-0123456789abcd", live: true}, func(c *service.Config) {
		c.DarajaQueryAfter = time.Hour // the abusive prompts stay unanswered
		c.API.LinkHolds = holds
	})
	b := newBundle(t, env, "Concert Tickets")
	link := b.pythonCreateLink(t, map[string]any{"title": "Concert", "amount": 100, "usage_limit": 100})
	id := link["id"].(string)
	ctx := context.Background()

	const abusers = 100
	phone := func(i int) string { return fmt.Sprintf("2547139%05d", i) }
	var wg sync.WaitGroup
	errs := make(chan string, abusers)
	sem := make(chan struct{}, 8)
	for i := range abusers {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			sess, pay := linkPay(env, id, "", phone(i), 100)
			if sess.Status != 200 || pay.Status != 200 {
				errs <- fmt.Sprintf("abuser %d: session %d %s, pay %d %s", i, sess.Status, sess.Body, pay.Status, pay.Body)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	// Every abusive prompt reached Daraja and was accepted: without bounds each would
	// hold its use for as long as its invoice stays PROCESSING, i.e. for ever.
	for i := range abusers {
		promptOf(t, fake, phone(i))
	}
	forever := storage.LinkHolds{Send: 24 * time.Hour, Accepted: 24 * time.Hour}
	if u, err := storage.PaymentLinkUsageWithin(ctx, env.Schema.DB, id, forever); err != nil || u.InFlight != abusers || u.Completed != 0 {
		t.Fatalf("the abusers hold %+v (%v), want all %d uses in flight", u, err, abusers)
	}

	// A genuine payer gets in once the holds have passed (busy until then: the link
	// is never sold beyond its limit while the abusers' prompts may still be paid).
	const genuine = "254713800001"
	var pay servicetest.Response
	waittest.Eventually(t, holds.Send+holds.Accepted+20*time.Second, func() (bool, string) {
		var sess servicetest.Response
		sess, pay = linkPay(env, id, "", genuine, 100)
		if sess.Status == 200 && pay.Status == 200 {
			return true, ""
		}
		if _, code, _ := errorBody(t, firstFailure(sess, pay)); code != "payment_link_busy" {
			t.Fatalf("genuine payer: session %d %s, pay %d %s", sess.Status, sess.Body, pay.Status, pay.Body)
		}
		return false, fmt.Sprintf("a genuine payer was locked out of the link by %d unanswered prompts", abusers)
	})
	inv := invoiceIDOf(pay.Map(t))
	p := promptOf(t, fake, genuine)
	if err := fake.Complete(p.CheckoutRequestID, 0, ""); err != nil {
		t.Fatal(err)
	}
	if final := b.waitInvoice(t, inv); final["state"] != "COMPLETE" {
		t.Fatalf("genuine payment: %v", final)
	}

	// An abusive prompt paid after its hold ran out is credited and counted.
	late := promptOf(t, fake, phone(0))
	if err := fake.Complete(late.CheckoutRequestID, 0, ""); err != nil {
		t.Fatal(err)
	}
	if final := b.waitInvoice(t, invoiceOfPrompt(t, late)); final["state"] != "COMPLETE" {
		t.Fatalf("late success: %v", final)
	}
	if u, err := storage.PaymentLinkUsageWithin(ctx, env.Schema.DB, id, holds); err != nil || u.Completed != 2 {
		t.Fatalf("usage %+v (%v), want 2 completed", u, err)
	}
	if cur, _ := b.balance(t, b.settlement); cur != "197.00" {
		t.Fatalf("wallet %s, want 197.00 (two payments of 100 less 1.5%%)", cur)
	}

	// On a 1-use link the same race over-uses it: a prompt whose hold ran out, a
	// second payer who then pays, and the first prompt's late success. Both are
	// credited; the link shows its limit reached.
	one := b.pythonCreateLink(t, map[string]any{"title": "Single seat", "amount": 100, "usage_limit": 1})
	oneID := one["id"].(string)
	if sess, pay := linkPay(env, oneID, "", "254713800002", 100); sess.Status != 200 || pay.Status != 200 {
		t.Fatalf("first payer: %d %s / %d %s", sess.Status, sess.Body, pay.Status, pay.Body)
	}
	first := promptOf(t, fake, "254713800002")
	time.Sleep(holds.Send + holds.Accepted) // the delay is under test: the first prompt's hold runs out
	sess, pay2 := linkPay(env, oneID, "", "254713800003", 100)
	if sess.Status != 200 || pay2.Status != 200 {
		t.Fatalf("second payer after the hold: %d %s / %d %s", sess.Status, sess.Body, pay2.Status, pay2.Body)
	}
	second := promptOf(t, fake, "254713800003")
	for _, p := range []mpesatest.FakeSTKRequest{second, first} {
		if err := fake.Complete(p.CheckoutRequestID, 0, ""); err != nil {
			t.Fatal(err)
		}
		if final := b.waitInvoice(t, invoiceOfPrompt(t, p)); final["state"] != "COMPLETE" {
			t.Fatalf("payment on the 1-use link: %v", final)
		}
	}
	if u, err := storage.PaymentLinkUsageWithin(ctx, env.Schema.DB, oneID, holds); err != nil || u.Completed != 2 {
		t.Fatalf("1-use link usage %+v (%v), want 2 completed (over its limit)", u, err)
	}
	if page := env.Do("GET", "/pay/"+oneID+"/", nil); !strings.Contains(string(page.Body), "reached its limit") {
		t.Errorf("page of the over-used link: %s", page.Body)
	}
	ledgerOK(t, b)
}

// invoiceOfPrompt is the invoice a prompt was sent for: the segment its callback
// URL names (its CheckoutRequestID may not be recorded yet).
func invoiceOfPrompt(t *testing.T, p mpesatest.FakeSTKRequest) string {
	t.Helper()
	parts := strings.Split(p.CallBackURL, "/")
	if len(parts) < 2 {
		t.Fatalf("callback URL %q names no invoice", p.CallBackURL)
	}
	return parts[len(parts)-2] // .../<token>/<invoice>/<MAC>
}

// firstFailure is the first of the two answers that is not 200.
func firstFailure(sess, pay servicetest.Response) servicetest.Response {
	if sess.Status != 200 {
		return sess
	}
	return pay
}

// Sessions and prompts of a link have budgets per client address (as the rate
// limiter sees it: X-Forwarded-For from a trusted proxy) and per link; spent, they
// answer 429 `throttled` JSON with Retry-After.
func TestPaymentLinkBudgets(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) {
		c.API.RateLimit, c.API.RateBurst = 1000, 2000
		c.API.AddrRateLimit, c.API.AddrRateBurst = 1000, 2000
		c.API.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		c.API.LinkLimits = api.LinkLimits{
			SessionsPerAddr: api.Budget{Burst: 3, Every: time.Hour}, SessionsPerLink: api.Budget{Burst: 8, Every: time.Hour},
			PromptsPerAddr: api.Budget{Burst: 2, Every: time.Hour}, PromptsPerLink: api.Budget{Burst: 4, Every: time.Hour},
		}
	})
	b := newBundle(t, env, "Budgets")
	throttled := func(t *testing.T, what string, r servicetest.Response) {
		t.Helper()
		if r.Status != 429 {
			t.Fatalf("%s: %d %s, want 429", what, r.Status, r.Body)
		}
		if _, code, _ := errorBody(t, r); code != "throttled" {
			t.Fatalf("%s: code %q: %s", what, code, r.Body)
		}
		if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 {
			t.Fatalf("%s: Retry-After %q", what, r.Header.Get("Retry-After"))
		}
	}
	session := func(linkID, xff string) servicetest.Response {
		return env.Do("POST", "/pay/"+linkID+"/session/", map[string]any{}, "X-Forwarded-For", xff)
	}

	t.Run("Sessions", func(t *testing.T) {
		id := b.pythonCreateLink(t, map[string]any{"title": "Sessions", "amount": 100})["id"].(string)
		for i := range 3 {
			if r := session(id, "203.0.113.1"); r.Status != 200 {
				t.Fatalf("session %d: %d %s", i, r.Status, r.Body)
			}
		}
		throttled(t, "4th session from one address", session(id, "203.0.113.1"))
		// Another link's budget is its own, for the same address.
		other := b.pythonCreateLink(t, map[string]any{"title": "Other", "amount": 100})["id"].(string)
		if r := session(other, "203.0.113.1"); r.Status != 200 {
			t.Fatalf("the address on another link: %d %s", r.Status, r.Body)
		}
		for i := range 3 {
			if r := session(id, "203.0.113.2"); r.Status != 200 {
				t.Fatalf("another address, session %d: %d %s", i, r.Status, r.Body)
			}
		}
		for i := range 2 {
			if r := session(id, "203.0.113.3"); r.Status != 200 {
				t.Fatalf("a third address, session %d: %d %s", i, r.Status, r.Body)
			}
		}
		// 8 sessions of the link: its own budget is spent, for every address.
		throttled(t, "9th session of the link", session(id, "203.0.113.4"))
	})

	t.Run("Prompts", func(t *testing.T) {
		id := b.pythonCreateLink(t, map[string]any{"title": "Prompts", "amount": 100})["id"].(string)
		for i := range 2 {
			if _, pay := linkPay(env, id, "198.51.100.1", "254708374149", 100); pay.Status != 200 {
				t.Fatalf("prompt %d: %d %s", i, pay.Status, pay.Body)
			}
		}
		_, pay := linkPay(env, id, "198.51.100.1", "254708374149", 100)
		throttled(t, "3rd prompt from one address", pay)
		for i := range 2 {
			if _, pay := linkPay(env, id, "198.51.100.2", "254708374149", 100); pay.Status != 200 {
				t.Fatalf("another address, prompt %d: %d %s", i, pay.Status, pay.Body)
			}
		}
		_, pay = linkPay(env, id, "198.51.100.3", "254708374149", 100)
		throttled(t, "5th prompt of the link", pay)
	})
}
