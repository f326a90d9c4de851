package api_test

import (
	"regexp"
	"strings"
	"sync"
	"testing"

	"paysvc/actors/values/ids"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// forcedIDs is the service's id source in these tests: the ids queued are drawn
// first, then random ones (ids.Alias), so a test makes a request draw an id it
// knows is taken.
type forcedIDs struct {
	mu     sync.Mutex
	queue  []string
	always string // drawn every time when set
	drawn  int
}

func (f *forcedIDs) draw(n int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drawn++
	if f.always != "" {
		return f.always
	}
	if len(f.queue) > 0 {
		id := f.queue[0]
		f.queue = f.queue[1:]
		return id
	}
	return ids.Alias(n)
}

func (f *forcedIDs) next(idList ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queue = append(f.queue, idList...)
}

var newIDShape = regexp.MustCompile(`^[2-9A-HJ-NP-Z]{12}$`)

// An id drawn at the edge that another row holds (another merchant's, or the
// same merchant's) is refused by the engine before anything is written and drawn
// again: the request succeeds with a fresh id, nothing is quarantined, no 500.
// Before, another merchant's invoice id failed the batch commit on the primary
// key and the command was quarantined (a 500 and a page).
func TestIDClashIsDrawnAgain(t *testing.T) {
	t.Parallel()
	src := &forcedIDs{}
	env := servicetest.Start(t, func(c *service.Config) { c.API.NewID = src.draw })
	a, b := newBundle(t, env, "Clash A"), newBundle(t, env, "Clash B")
	quarantined := func(t *testing.T) {
		t.Helper()
		var n int
		if err := env.Schema.DB.Get(&n, `SELECT count(*) FROM command_quarantine`); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("%d commands quarantined", n)
		}
	}
	push := func(t *testing.T, m *bundle, headers ...string) string {
		t.Helper()
		r := m.post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254708374149", "amount": "100"}, headers...)
		if r.Status != 200 {
			t.Fatalf("push: %d %s", r.Status, r.Body)
		}
		id := r.Map(t)["invoice"].(map[string]any)["invoice_id"].(string)
		if !newIDShape.MatchString(id) {
			t.Fatalf("new invoice id %q is not 12 characters of the alias alphabet", id)
		}
		return id
	}
	taken := ids.Alias(12)
	src.next(taken)
	if got := push(t, a); got != taken {
		t.Fatalf("first push drew %q, want the queued %q", got, taken)
	}

	t.Run("Invoice_OtherMerchant", func(t *testing.T) {
		src.next(taken)
		if got := push(t, b); got == taken {
			t.Fatalf("merchant B got merchant A's invoice id %s", got)
		}
		quarantined(t)
		// A's invoice is untouched and still A's alone.
		if r := a.post("/api/v1/payment/status/", map[string]any{"invoice_id": taken}); r.Status != 200 {
			t.Fatalf("A's invoice after the clash: %d %s", r.Status, r.Body)
		}
		if r := b.post("/api/v1/payment/status/", map[string]any{"invoice_id": taken}); r.Status != 404 {
			t.Fatalf("B reads A's invoice: %d %s", r.Status, r.Body)
		}
	})

	t.Run("Invoice_SameMerchant", func(t *testing.T) {
		src.next(taken)
		if got := push(t, a); got == taken {
			t.Fatal("a second invoice under the same id")
		}
		quarantined(t)
	})

	t.Run("Invoice_IdempotencyKeyReplaysTheDrawThatWasApplied", func(t *testing.T) {
		src.next(taken)
		first := push(t, b, "Idempotency-Key", "clash-key-1")
		src.next(taken)
		r := b.post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254708374149", "amount": "100"},
			"Idempotency-Key", "clash-key-1")
		if r.Status != 200 || r.Map(t)["invoice"].(map[string]any)["invoice_id"] != first {
			t.Fatalf("replay: %d %s, want invoice %s", r.Status, r.Body, first)
		}
		quarantined(t)
	})

	t.Run("PaymentFile_OtherMerchant", func(t *testing.T) {
		r := a.post("/api/v1/send-money/initiate", b2cFile("YES", "254708374149"))
		if r.Status != 200 {
			t.Fatalf("A's file: %d %s", r.Status, r.Body)
		}
		fileA := r.Map(t)["file_id"].(string)
		txnA := r.Map(t)["transactions"].([]any)[0].(map[string]any)["transaction_id"].(string)
		for _, clash := range [][]string{{fileA, ids.Alias(12)}, {ids.Alias(12), txnA}} {
			src.next(clash...)
			r = b.post("/api/v1/send-money/initiate", b2cFile("YES", "254708374149"))
			if r.Status != 200 {
				t.Fatalf("B's file drawing %v: %d %s", clash, r.Status, r.Body)
			}
			f := r.Map(t)
			txn := f["transactions"].([]any)[0].(map[string]any)["transaction_id"].(string)
			if f["file_id"] == fileA || txn == txnA || !newIDShape.MatchString(f["file_id"].(string)) || !newIDShape.MatchString(txn) {
				t.Fatalf("B's file %v / transaction %s after drawing %v", f["file_id"], txn, clash)
			}
		}
		quarantined(t)
	})

	t.Run("Wallet_OtherMerchant", func(t *testing.T) {
		src.next(a.settlement)
		if w := b.wallet(t, "KES", "clash"); w == a.settlement || !newIDShape.MatchString(w) {
			t.Fatalf("B's wallet %s (A's settlement wallet is %s)", w, a.settlement)
		}
		quarantined(t)
	})

	t.Run("Customer_OtherMerchant", func(t *testing.T) {
		r := a.post("/api/v1/customers/", map[string]any{"email": "payer-a@example.com"})
		if r.Status != 201 {
			t.Fatalf("A's customer: %d %s", r.Status, r.Body)
		}
		custA := r.Map(t)["customer_id"].(string)
		src.next(custA)
		r = b.post("/api/v1/customers/", map[string]any{"email": "payer-b@example.com"})
		if r.Status != 201 || r.Map(t)["customer_id"] == custA {
			t.Fatalf("B's customer drawing A's id: %d %s", r.Status, r.Body)
		}
	})

	t.Run("Webhook_OtherMerchant", func(t *testing.T) {
		hook := map[string]any{"endpoint": "https://hooks.example.com/paysvc", "challenge": "a-long-challenge", "collection_event": true}
		r := a.post("/api/v1/webhooks/", hook)
		if r.Status != 201 {
			t.Fatalf("A's webhook: %d %s", r.Status, r.Body)
		}
		hookA := r.Map(t)["id"].(string)
		src.next(strings.TrimPrefix(hookA, "WH"))
		r = b.post("/api/v1/webhooks/", hook)
		if r.Status != 201 || r.Map(t)["id"] == hookA {
			t.Fatalf("B's webhook drawing A's id: %d %s", r.Status, r.Body)
		}
	})

	// A source that draws the taken id every time: the request says retry (503,
	// Retry-After) after a few draws, creates nothing, and quarantines nothing.
	t.Run("EveryDrawTaken_SaysRetry", func(t *testing.T) {
		src.mu.Lock()
		src.always, src.drawn = taken, 0
		src.mu.Unlock()
		r := b.post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254708374149", "amount": "100"})
		src.mu.Lock()
		src.always = ""
		drawn := src.drawn
		src.mu.Unlock()
		if r.Status != 503 || r.Header.Get("Retry-After") == "" {
			t.Fatalf("every id taken: %d %s, want 503 with Retry-After", r.Status, r.Body)
		}
		if _, code, _ := errorBody(t, r); code != "id_taken" {
			t.Fatalf("code %q, want id_taken", code)
		}
		if drawn < 2 {
			t.Fatalf("%d draws before giving up", drawn)
		}
		quarantined(t)
	})
}
