package rails

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"paysvc/actors/aggregates/invoice"
	"paysvc/actors/rails/mpesa"
	"paysvc/actors/values/money"
	"paysvc/actors/values/waittest"
	"paysvc/storage/storagetest"
)

// A sandbox M-Pesa invoice whose outcome never came (its prompt stopped with the
// simulator's process) has the prompt sent again, once per after, and the phone's
// outcome comes back; a fresh, final, held or card invoice is left alone.
func TestRecoverSandboxSendsStalePromptsAgain(t *testing.T) {
	db := storagetest.New(t)
	db.DB.MustExec(`INSERT INTO merchants (merchant_id, name, environment) VALUES ('M1', 'Shop', 'sandbox'), ('M2', 'Live Shop', 'live')`)
	old := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
	merchant := "M1"
	add := func(id, state, provider, phone string, held bool, updated time.Time) {
		s := invoice.State{InvoiceID: id, MerchantID: merchant, WalletID: "W1", State: state, Provider: provider, Currency: "KES",
			Value: money.MustParse("100.00"), Charges: money.MustParse("1.50"), NetAmount: money.MustParse("98.50"),
			Account: phone, APIRef: "ref-" + id, Version: 1, CreatedAt: updated, UpdatedAt: updated, Held: held}
		data, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		db.DB.MustExec(`INSERT INTO invoices (invoice_id, merchant_id, state, version, data, created_at, updated_at)
			VALUES ($1, $5, $2, 1, $3, $4, $4)`, id, state, data, updated, merchant)
	}
	add("PEND0001", "PENDING", "M-PESA", "254712345678", false, old)
	add("PROC0001", "PROCESSING", "M-PESA", "254712340003", false, old) // insufficient funds
	add("FRESH001", "PENDING", "M-PESA", "254712345678", false, time.Now().UTC())
	add("HELD0001", "PROCESSING", "M-PESA", "254712345678", true, old)
	add("CARD0001", "PENDING", "CARD", "", false, old)
	add("DONE0001", "COMPLETE", "M-PESA", "254712345678", false, old)
	// A live merchant's stale prompt in the same database: never the sandbox
	// simulator's to answer.
	merchant = "M2"
	add("LIVE0001", "PENDING", "M-PESA", "254712345678", false, old)

	var mu sync.Mutex
	got := map[string][]mpesa.Result{}
	sim := mpesa.NewSimulator(func(_ context.Context, r mpesa.Result) error {
		mu.Lock()
		defer mu.Unlock()
		got[r.InvoiceID] = append(got[r.InvoiceID], r)
		return nil
	}, mpesa.SimOptions{AcceptDelay: time.Millisecond, FinalDelay: time.Millisecond})
	defer sim.Close()
	results := func() map[string][]mpesa.Result {
		mu.Lock()
		defer mu.Unlock()
		out := map[string][]mpesa.Result{}
		for k, v := range got {
			out[k] = append([]mpesa.Result(nil), v...)
		}
		return out
	}
	finals := func(rs []mpesa.Result) (n int, code int) {
		for _, r := range rs {
			if r.Stage == mpesa.StageFinal {
				n, code = n+1, r.Code
			}
		}
		return n, code
	}

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	resent := map[string]time.Time{}
	rail := &pushRecorder{Rail: sim}
	recoverSandboxOnce(context.Background(), db.DB, NewScope(db.DB, "sandbox", ""), rail, time.Minute, resent, log)
	// The sweep pushes before it returns: what it sent is known now.
	if got := rail.sent(); !slices.Equal(got, []string{"PEND0001", "PROC0001"}) {
		t.Fatalf("the sweep pushed %v, want PEND0001 and PROC0001", got)
	}
	// The prompt is the stored invoice's: its merchant, payer, amount and reference.
	rail.mu.Lock()
	req := rail.reqs["PEND0001"]
	rail.mu.Unlock()
	if req.MerchantID != "M1" || req.Phone != "254712345678" || req.Amount.String() != "100.00" || req.AccountRef != "ref-PEND0001" {
		t.Fatalf("prompt sent again: %+v", req)
	}
	waittest.Eventually(t, 10*time.Second, func() (bool, string) {
		r := results()
		p, _ := finals(r["PEND0001"])
		q, _ := finals(r["PROC0001"])
		return p == 1 && q == 1, fmt.Sprintf("outcomes after a sweep: %+v", r)
	})
	// A second sweep within after sends nothing again: no push, so no result can
	// follow the ones already counted.
	recoverSandboxOnce(context.Background(), db.DB, NewScope(db.DB, "sandbox", ""), rail, time.Minute, resent, log)
	if got := rail.sent(); len(got) != 2 {
		t.Fatalf("a second sweep within after pushed again: %v", got)
	}
	r := results()
	if len(r) != 2 {
		t.Fatalf("prompts sent again for %d invoices, want PEND0001 and PROC0001 only: %+v", len(r), r)
	}
	if n, code := finals(r["PEND0001"]); n != 1 || code != mpesa.CodeSuccess {
		t.Fatalf("PEND0001: %d final results, code %d; want one success", n, code)
	}
	if n, code := finals(r["PROC0001"]); n != 1 || code != mpesa.CodeInsufficientFunds {
		t.Fatalf("PROC0001: %d final results, code %d; want one insufficient-funds", n, code)
	}
	for _, res := range r["PEND0001"] {
		if res.MerchantID != "M1" {
			t.Fatalf("result for another merchant: %+v", res)
		}
	}
}

// pushRecorder is a rail that records, in order, the invoices it was asked to
// prompt for, and passes each push on.
type pushRecorder struct {
	mpesa.Rail
	mu     sync.Mutex
	pushed []string
	reqs   map[string]mpesa.STKRequest
}

func (p *pushRecorder) Push(ctx context.Context, req mpesa.STKRequest) (string, error) {
	p.mu.Lock()
	p.pushed = append(p.pushed, req.InvoiceID)
	if p.reqs == nil {
		p.reqs = map[string]mpesa.STKRequest{}
	}
	p.reqs[req.InvoiceID] = req
	p.mu.Unlock()
	return p.Rail.Push(ctx, req)
}

func (p *pushRecorder) sent() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(slices.Values(p.pushed))
}
