package api_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/values/money"
	"paysvc/storage"
	"paysvc/topics"
)

func TestWallets(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("CreateWorking", func(t *testing.T) {
		r := b.post("/api/v1/wallets", map[string]any{"currency": "KES", "wallet_type": "WORKING", "label": "Ops-1", "unknown_field": 1, "public_key": b.public})
		if r.Status != 201 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		m := r.Map(t)
		if m["wallet_type"] != "WORKING" || m["currency"] != "KES" || m["label"] != "Ops-1" || m["can_disburse"] != false ||
			m["current_balance"] != "0.00" || m["available_balance"] != "0.00" {
			t.Fatalf("created wallet: %s", r.Body)
		}
	})
	t.Run("CreateCanDisburse", func(t *testing.T) {
		r := b.post("/api/v1/wallets/", map[string]any{"currency": "USD", "wallet_type": "WORKING", "label": "Payouts", "can_disburse": true})
		if r.Status != 201 || r.Map(t)["can_disburse"] != true {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
	})
	t.Run("LabelUniquePerCurrency", func(t *testing.T) {
		b.wallet(t, "KES", "Dup")
		r := b.post("/api/v1/wallets/", map[string]any{"currency": "KES", "wallet_type": "WORKING", "label": "dup"})
		if _, code, attr := errorBody(t, r); r.Status != 400 || code != "label_taken" || attr != "label" {
			t.Fatalf("duplicate label: %d %s", r.Status, r.Body)
		}
		// Same label in another currency is fine.
		b.wallet(t, "EUR", "Dup")
	})
	t.Run("Refusals", func(t *testing.T) {
		for _, tc := range []struct {
			body any
			attr string
		}{
			{map[string]any{"currency": "KES", "wallet_type": "SETTLEMENT", "label": "S"}, "wallet_type"},
			{map[string]any{"currency": "KES", "wallet_type": "OTHER", "label": "S"}, "wallet_type"},
			{map[string]any{"currency": "XYZ", "wallet_type": "WORKING", "label": "S"}, "currency"},
			{map[string]any{"wallet_type": "WORKING", "label": "S"}, "currency"},
			{map[string]any{"currency": "KES", "wallet_type": "WORKING"}, "label"},
			{map[string]any{"currency": "KES", "wallet_type": "WORKING", "label": "bad<label>"}, "label"},
			{map[string]any{"currency": "KES", "wallet_type": "WORKING", "label": "X", "can_disburse": "maybe"}, "can_disburse"},
			{map[string]any{"currency": 5, "wallet_type": "WORKING", "label": "X"}, "currency"},
		} {
			r := b.post("/api/v1/wallets/", tc.body)
			if _, _, attr := errorBody(t, r); r.Status != 400 || attr != tc.attr {
				t.Errorf("%v: %d %s (want 400 on %s)", tc.body, r.Status, r.Body, tc.attr)
			}
		}
		r := b.post("/api/v1/wallets/", "[1,2")
		if r.Status != 400 {
			t.Fatalf("malformed JSON: %d %s", r.Status, r.Body)
		}
		errorBody(t, r)
	})
	t.Run("SettlementWalletWhenFirstNeeded", func(t *testing.T) {
		count := func(currency string) int {
			var l struct{ Results []map[string]any }
			b.get("/api/v1/wallets/?page_size=500").JSON(t, &l)
			n := 0
			for _, w := range l.Results {
				if w["wallet_type"] == "SETTLEMENT" && w["currency"] == currency {
					n++
					if w["label"] != "SETTLEMENT "+currency {
						t.Fatalf("settlement label %v", w["label"])
					}
				}
			}
			return n
		}
		if count("GBP") != 0 {
			t.Fatal("a GBP settlement wallet exists before any GBP wallet")
		}
		b.wallet(t, "GBP", "Pounds-1")
		b.wallet(t, "GBP", "Pounds-2")
		if n := count("GBP"); n != 1 {
			t.Fatalf("%d GBP settlement wallets after two GBP wallets, want 1", n)
		}
		if n := count("KES"); n != 1 {
			t.Fatalf("%d KES settlement wallets, want the one made with the merchant", n)
		}
		r := b.post("/api/v1/wallets/", map[string]any{"currency": "EUR", "wallet_type": "WORKING", "label": "settlement eur"})
		if _, _, attr := errorBody(t, r); r.Status != 400 || attr != "label" {
			t.Fatalf("reserved label: %d %s", r.Status, r.Body)
		}
	})
	t.Run("GetBothSlashForms", func(t *testing.T) {
		for _, p := range []string{"/api/v1/wallets/" + b.settlement, "/api/v1/wallets/" + b.settlement + "/"} {
			r := b.get(p)
			if r.Status != 200 || r.Map(t)["wallet_id"] != b.settlement {
				t.Fatalf("%s: %d %s", p, r.Status, r.Body)
			}
			if !r.Close {
				t.Fatalf("GET must answer Connection: close")
			}
		}
	})
	t.Run("UnknownWallet", func(t *testing.T) {
		r := b.get("/api/v1/wallets/NOPE/")
		if _, code, _ := errorBody(t, r); r.Status != 404 || code != "not_found" {
			t.Fatalf("unknown wallet: %d %s", r.Status, r.Body)
		}
	})
	t.Run("ListPagination", func(t *testing.T) {
		r := b.get("/api/v1/wallets/?page_size=2")
		var l struct {
			Count   int              `json:"count"`
			Next    *string          `json:"next"`
			Prev    *string          `json:"previous"`
			Results []map[string]any `json:"results"`
		}
		r.JSON(t, &l)
		if l.Count < 3 || len(l.Results) != 2 || l.Next == nil || l.Prev != nil {
			t.Fatalf("page 1: %s", r.Body)
		}
		r = b.get("/api/v1/wallets/?page_size=2&page=2")
		r.JSON(t, &l)
		if l.Prev == nil || len(l.Results) == 0 {
			t.Fatalf("page 2: %s", r.Body)
		}
		if r := b.get("/api/v1/wallets/?page=0"); r.Status != 400 {
			t.Fatalf("page 0: %d", r.Status)
		}
	})
}

func TestIntraTransfer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w1 := b.wallet(t, "KES", "One")
	w2 := b.wallet(t, "KES", "Two")
	usd := b.wallet(t, "USD", "Dollars")
	b.deposit(t, w1, "500.00")

	t.Run("Moves", func(t *testing.T) {
		r := b.transfer(w1, w2, "120.50")
		if r.Status != 200 {
			t.Fatalf("transfer: %d %s", r.Status, r.Body)
		}
		var out struct {
			Origin, Destination map[string]any
		}
		r.JSON(t, &out)
		if out.Origin["wallet_id"] != w1 || out.Origin["available_balance"] != "379.50" ||
			out.Destination["wallet_id"] != w2 || out.Destination["current_balance"] != "120.50" {
			t.Fatalf("transfer response: %s", r.Body)
		}
		// A JSON number is accepted and parsed exactly.
		if r := b.transfer(w1, w2, 0.5); r.Status != 200 {
			t.Fatalf("numeric amount: %d %s", r.Status, r.Body)
		}
		if cur, avail := b.balance(t, w2); cur != "121.00" || avail != "121.00" {
			t.Fatalf("destination balance %s/%s", cur, avail)
		}
	})
	t.Run("Statement", func(t *testing.T) {
		r := b.get("/api/v1/wallets/" + w1 + "/transactions/")
		var l struct {
			Count   int              `json:"count"`
			Results []map[string]any `json:"results"`
		}
		r.JSON(t, &l)
		if r.Status != 200 || l.Count != 3 {
			t.Fatalf("statement: %d %s", r.Status, r.Body)
		}
		newest, oldest := l.Results[0], l.Results[2]
		if newest["value"] != "-0.50" || newest["running_balance"] != "379.00" || newest["trans_type"] != "TRANSFER" ||
			oldest["value"] != "500.00" || oldest["trans_type"] != "DEPOSIT" || newest["narrative"] != "test transfer" {
			t.Fatalf("statement rows: %s", r.Body)
		}
		for _, row := range l.Results {
			for _, k := range []string{"transaction_id", "value", "running_balance", "narrative", "trans_type", "created_at"} {
				if _, ok := row[k]; !ok {
					t.Fatalf("statement row lacks %s: %v", k, row)
				}
			}
		}
	})
	t.Run("Refusals", func(t *testing.T) {
		before, _ := b.balance(t, w1)
		for _, tc := range []struct {
			name   string
			from   string
			body   map[string]any
			status int
			code   string
		}{
			{"Insufficient", w1, map[string]any{"wallet_id": w2, "amount": "379.01", "narrative": "x"}, 400, "insufficient_funds"},
			{"CurrencyMismatch", w1, map[string]any{"wallet_id": usd, "amount": "1.00", "narrative": "x"}, 400, "currency_mismatch"},
			{"UnknownDestination", w1, map[string]any{"wallet_id": "NOPE", "amount": "1.00", "narrative": "x"}, 400, "destination_not_found"},
			{"UnknownSource", "NOPE", map[string]any{"wallet_id": w2, "amount": "1.00", "narrative": "x"}, 404, "not_found"},
			{"SameWallet", w1, map[string]any{"wallet_id": w1, "amount": "1.00", "narrative": "x"}, 400, "same_wallet"},
			{"Zero", w1, map[string]any{"wallet_id": w2, "amount": "0", "narrative": "x"}, 400, "invalid"},
			{"Negative", w1, map[string]any{"wallet_id": w2, "amount": "-1.00", "narrative": "x"}, 400, "invalid"},
			{"OverMax", w1, map[string]any{"wallet_id": w2, "amount": "999999.01", "narrative": "x"}, 400, "invalid"},
			{"ThreeDecimals", w1, map[string]any{"wallet_id": w2, "amount": "1.234", "narrative": "x"}, 400, "invalid"},
			{"NotANumber", w1, map[string]any{"wallet_id": w2, "amount": "abc", "narrative": "x"}, 400, "invalid"},
			{"NoNarrative", w1, map[string]any{"wallet_id": w2, "amount": "1.00"}, 400, "invalid"},
			{"NoDestination", w1, map[string]any{"amount": "1.00", "narrative": "x"}, 400, "invalid"},
		} {
			r := b.post(fmt.Sprintf("/api/v1/wallets/%s/intra_transfer/", tc.from), tc.body)
			if _, code, _ := errorBody(t, r); r.Status != tc.status || code != tc.code {
				t.Errorf("%s: %d %s, want %d %s", tc.name, r.Status, r.Body, tc.status, tc.code)
			}
		}
		r := b.post("/api/v1/wallets/"+w1+"/intra_transfer/", `{"wallet_id":"`+w2+`","amount":1e2,"narrative":"x"}`)
		if _, code, attr := errorBody(t, r); r.Status != 400 || code != "invalid" || attr != "amount" {
			t.Errorf("exponent amount: %d %s", r.Status, r.Body)
		}
		if after, _ := b.balance(t, w1); after != before {
			t.Fatalf("a refused transfer changed the balance: %s -> %s", before, after)
		}
	})
	t.Run("MaxAmountAllowed", func(t *testing.T) {
		big := b.wallet(t, "KES", "Big")
		b.deposit(t, big, "999999.00")
		if r := b.transfer(big, w2, "999999.00"); r.Status != 200 {
			t.Fatalf("max transfer: %d %s", r.Status, r.Body)
		}
	})
	t.Run("EventPublished", func(t *testing.T) {
		// Events are ordered per key (the origin wallet), not across keys: look for the
		// first transfer's event among all of them.
		var found *topics.Event
		readLog(t, b.env, topics.EventTopics[topics.WalletTransferEvent], 20*time.Second, func(r *kgo.Record) {
			ev, err := decodeEvent(r.Value)
			if err != nil {
				t.Errorf("bad event: %v", err)
				return
			}
			if p := decodeTransfer(t, ev.Payload); p.OriginWallet == w1 && p.AmountSent == "120.50" {
				found = &ev
			}
		}, func() (bool, string) {
			return found != nil, "the wallet_transfer_event of the first transfer never arrived"
		})
		p := decodeTransfer(t, found.Payload)
		if found.Type != "wallet_transfer_event" || found.MerchantID != b.merchant || found.Key != w1 ||
			p.FromCurrency != "KES" || p.ToCurrency != "KES" || p.DestinationWallet != w2 || p.Status != "COMPLETE" {
			t.Fatalf("event: %+v payload %+v", *found, p)
		}
	})
}

func TestMerchantIsolation(t *testing.T) {
	t.Parallel()
	env := setup(t).env
	a := newBundle(t, env, "Merchant A")
	bb := newBundle(t, env, "Merchant B")
	aw := a.wallet(t, "KES", "A-Working")
	a.deposit(t, a.settlement, "100.00")
	bw := bb.wallet(t, "KES", "B-Working")
	bb.deposit(t, bb.settlement, "100.00")

	for _, id := range []string{a.settlement, aw} {
		for _, r := range []struct {
			name string
			resp func() (int, string)
		}{
			{"get", func() (int, string) { r := bb.get("/api/v1/wallets/" + id); return r.Status, string(r.Body) }},
			{"transactions", func() (int, string) {
				r := bb.get("/api/v1/wallets/" + id + "/transactions/")
				return r.Status, string(r.Body)
			}},
			{"intra_transfer", func() (int, string) { r := bb.transfer(id, bw, "1.00"); return r.Status, string(r.Body) }},
			{"deposit", func() (int, string) {
				r := bb.post("/api/v1/sandbox/wallets/"+id+"/deposit/", map[string]any{"amount": "1.00"})
				return r.Status, string(r.Body)
			}},
		} {
			if status, body := r.resp(); status != 404 {
				t.Errorf("merchant B %s on A's wallet %s: %d %s", r.name, id, status, body)
			}
		}
	}
	// A's wallet as the destination of B's transfer is unknown to B.
	r := bb.transfer(bb.settlement, aw, "1.00")
	if _, code, _ := errorBody(t, r); r.Status != 400 || code != "destination_not_found" {
		t.Fatalf("B -> A transfer: %d %s", r.Status, r.Body)
	}
	var l struct{ Count int }
	bb.get("/api/v1/wallets/").JSON(t, &l)
	if l.Count != 2 {
		t.Fatalf("B sees %d wallets, want its own 2", l.Count)
	}
	for _, w := range []string{a.settlement, aw} {
		if cur, _ := a.balance(t, w); (w == aw && cur != "0.00") || (w == a.settlement && cur != "100.00") {
			t.Fatalf("A's wallet %s changed: %s", w, cur)
		}
	}
}

// Two hundred transfers race out of a wallet that can afford half of them: exactly
// the affordable ones succeed, balances match the model, nothing goes negative.
func TestConcurrentTransfersFromOneWallet(t *testing.T) {
	t.Parallel()
	b := setup(t)
	src := b.wallet(t, "KES", "Source")
	dsts := []string{b.wallet(t, "KES", "D1"), b.wallet(t, "KES", "D2"), b.settlement}
	b.deposit(t, src, "100.00")

	var mu sync.Mutex
	ok, refused := 0, 0
	got := map[string]int{}
	var wg sync.WaitGroup
	for i := 0; i < 200; i++ {
		wg.Go(func() {
			dst := dsts[i%len(dsts)]
			r := b.transfer(src, dst, "1.00")
			mu.Lock()
			defer mu.Unlock()
			switch r.Status {
			case 200:
				ok++
				got[dst]++
			case 400:
				if _, code, _ := errorBody(t, r); code != "insufficient_funds" {
					t.Errorf("refusal code %s", code)
				}
				refused++
			default:
				t.Errorf("unexpected %d %s", r.Status, r.Body)
			}
		})
	}
	wg.Wait()
	if ok != 100 || refused != 100 {
		t.Fatalf("succeeded %d, refused %d; want 100 and 100", ok, refused)
	}
	if cur, avail := b.balance(t, src); cur != "0.00" || avail != "0.00" {
		t.Fatalf("source ends at %s/%s", cur, avail)
	}
	for _, d := range dsts {
		cur, _ := b.balance(t, d)
		if want := money.FromUnits(int64(got[d]) * 100).String(); cur != want {
			t.Fatalf("destination %s holds %s, model says %s", d, cur, want)
		}
	}
	rep, err := storage.CheckLedger(context.Background(), b.env.Schema.DB)
	if err != nil || !rep.OK {
		t.Fatalf("ledger check: %+v %v", rep, err)
	}
}
