package api_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

func TestPayRequests(t *testing.T) {
	t.Parallel()
	// The API's clock is the test's: a reminder's day passes when the test says, and
	// each reminder run reads it once, so its reads count the runs.
	clock := waittest.NewClock(time.Now())
	var reads atomic.Int64
	env := servicetest.Start(t, func(c *service.Config) {
		c.API.Now = func() time.Time { reads.Add(1); return clock.Now() }
	})
	b := newBundle(t, env, "Acme")
	mails := func() []map[string]any {
		var l struct{ Results []map[string]any }
		b.get("/api/v1/sandbox/mail/").JSON(t, &l)
		return l.Results
	}

	r := b.post("/api/v1/payment/collection/pay-requests/", map[string]any{"first_name": "Jane", "last_name": "Doe",
		"email": "jane@example.com", "currency": "KES", "amount": 300, "reason": "Invoice 42", "autosend_reminder": 1})
	if r.Status != 200 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	pr := r.Map(t)["detail"].(map[string]any)
	co := pr["checkout"].(map[string]any)
	if pr["sent_status"] != "SENT" || pr["payment_status"] != "Pending" || pr["failed_details"] != nil || pr["reminder_sent"] != false ||
		co["amount"] != "300.00" || co["email"] != "jane@example.com" || co["paid"] != false || pr["autosend_reminder_datetime"] == nil {
		t.Fatalf("pay request: %s", r.Body)
	}
	id := pr["request_id"].(string)
	if !strings.HasPrefix(co["url"].(string), env.BaseURL+"/checkout/") {
		t.Fatalf("checkout url %v is not under the service's public base URL %s", co["url"], env.BaseURL)
	}
	// The first email is picked by its subject, not by its position.
	var first []map[string]any
	for _, m := range mails() {
		if !strings.HasPrefix(m["subject"].(string), "Reminder:") {
			first = append(first, m)
		}
	}
	if len(first) != 1 || !strings.Contains(first[0]["subject"].(string), "KES 300.00") || first[0]["pay_request_id"] != id ||
		!strings.Contains(first[0]["text"].(string), co["url"].(string)) || !strings.Contains(first[0]["text"].(string), "Invoice 42") {
		t.Fatalf("mail: %v", first)
	}

	t.Run("ReminderOnce", func(t *testing.T) {
		clock.Advance(24*time.Hour + time.Second) // autosend_reminder 1: one day
		waittest.Eventually(t, 10*time.Second, func() (bool, string) {
			g := b.get("/api/v1/payment/collection/pay-requests/" + id + "/").Map(t)["detail"].(map[string]any)
			return g["reminder_sent"] == true, "the reminder was never sent"
		})
		// Several more reminder runs (no request reads the clock meanwhile): none
		// sends it again.
		seen := reads.Load()
		waittest.Eventually(t, 10*time.Second, func() (bool, string) {
			n := reads.Load() - seen
			return n >= 3, fmt.Sprintf("%d reminder runs since the reminder was sent, want 3", n)
		})
		reminders := 0
		for _, m := range mails() {
			if strings.HasPrefix(m["subject"].(string), "Reminder:") {
				reminders++
				// The reminder is sent by a background loop with no request to take a
				// host from; its link must be the same as the first email's.
				if !strings.Contains(m["text"].(string), co["url"].(string)) {
					t.Errorf("reminder link differs from %v: %v", co["url"], m["text"])
				}
			}
		}
		if reminders != 1 {
			t.Fatalf("%d reminders, want exactly 1", reminders)
		}
	})
	t.Run("RefusedRecipient", func(t *testing.T) {
		r := b.post("/api/v1/payment/collection/pay-requests/", map[string]any{"first_name": "No", "last_name": "Body",
			"email": "nobody@refused.example", "currency": "KES"})
		d := r.Map(t)["detail"].(map[string]any)
		if r.Status != 200 || d["sent_status"] != "FAILED" || !strings.Contains(d["failed_details"].(string), "550") {
			t.Fatalf("refused: %d %s", r.Status, r.Body)
		}
		// Nothing else is lost: the request and its checkout exist.
		g := b.get("/api/v1/payment/collection/pay-requests/" + d["request_id"].(string) + "/")
		if g.Status != 200 || g.Map(t)["detail"].(map[string]any)["sent_status"] != "FAILED" {
			t.Fatalf("get refused: %d %s", g.Status, g.Body)
		}
	})
	t.Run("PaidShowsOnTheRequest", func(t *testing.T) {
		r := b.post("/api/v1/payment/collection/", map[string]any{"method": "M-PESA", "currency": "KES", "amount": "300",
			"api_ref": "pr", "phone_number": "254788888888", "checkout_id": co["id"]})
		if r.Status != 200 {
			t.Fatalf("pay: %d %s", r.Status, r.Body)
		}
		b.waitInvoice(t, r.Map(t)["invoice"].(map[string]any)["id"].(string))
		g := b.get("/api/v1/payment/collection/pay-requests/" + id).Map(t)["detail"].(map[string]any)
		if g["payment_status"] != "Paid" || g["checkout"].(map[string]any)["paid"] != true {
			t.Fatalf("after payment: %v", g)
		}
		if cur, avail := b.balance(t, b.settlement); cur != "295.50" || avail != "295.50" {
			t.Fatalf("settlement %s/%s after the 300.00 request was paid, want 295.50 net", cur, avail)
		}
		ledgerOK(t, b)
	})
	t.Run("Validation", func(t *testing.T) {
		for _, tc := range []struct {
			body map[string]any
			attr string
		}{
			{map[string]any{"last_name": "D", "email": "a@b.co", "currency": "KES"}, "first_name"},
			{map[string]any{"first_name": "J", "last_name": "D", "currency": "KES"}, "email"},
			{map[string]any{"first_name": "J", "last_name": "D", "email": "bad", "currency": "KES"}, "email"},
			{map[string]any{"first_name": "J", "last_name": "D", "email": "a@b.co", "currency": "XXX"}, "currency"},
			{map[string]any{"first_name": "J", "last_name": "D", "email": "a@b.co", "currency": "KES", "autosend_reminder": 5}, "autosend_reminder"},
			{map[string]any{"first_name": "J", "last_name": "D", "email": "a@b.co", "currency": "KES", "amount": -1}, "amount"},
		} {
			r := b.post("/api/v1/payment/collection/pay-requests/", tc.body)
			if _, _, attr := errorBody(t, r); r.Status != 400 || attr != tc.attr {
				t.Errorf("%v: %d %s (want 400 on %s)", tc.body, r.Status, r.Body, tc.attr)
			}
		}
		other := newBundle(t, b.env, "Other")
		if r := other.get("/api/v1/payment/collection/pay-requests/" + id + "/"); r.Status != 404 {
			t.Fatalf("another merchant's pay request: %d", r.Status)
		}
	})
}
