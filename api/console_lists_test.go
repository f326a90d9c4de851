package api_test

// The console's growing lists page by keyset (webhook deliveries, wallets, plans,
// payment links), and the overview's money charts count per currency what came in
// from outside and went out, without the merchant's own transfers.

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"paysvc/actors/values/money"
	"paysvc/cmd/paysvc/service/servicetest"
)

// walkPages follows a console list's rel="next" links (matched by next) from
// start and returns every id item matched, in order, and how many pages it read.
func walkPages(t *testing.T, cc *consoleClient, session, start string, item, next *regexp.Regexp) ([]string, int) {
	t.Helper()
	var ids []string
	path, pages := start, 0
	for path != "" && pages < 10 {
		p := cc.page(sandboxCookie, session, strings.ReplaceAll(path, "&amp;", "&"))
		if p.Status != 200 {
			t.Fatalf("%s: %d\n%s", path, p.Status, p.Body)
		}
		got := item.FindAllStringSubmatch(p.Body, -1)
		if pages == 0 && len(got) != 50 {
			t.Fatalf("%s: the first page lists %d, want 50", start, len(got))
		}
		for _, m := range got {
			ids = append(ids, m[1])
		}
		path = ""
		if m := next.FindStringSubmatch(p.Body); m != nil {
			path = m[1]
		}
		pages++
	}
	return ids, pages
}

// unique fails if an id is listed more often than each (a row shown on two pages).
func unique(t *testing.T, what string, ids []string, each int) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, id := range ids {
		if n[id]++; n[id] > each {
			t.Errorf("%s: %s listed %d times", what, id, n[id])
		}
	}
	return n
}

func TestConsoleListsPageByKeyset(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, nil)
	b := newBundle(t, env, "Many Things")
	other := newBundle(t, env, "Someone Else")
	ctx := context.Background()
	db := env.Schema.DB

	// 52 wallets: the settlement wallet and 51 more.
	for i := range 51 {
		b.wallet(t, "KES", fmt.Sprintf("Till %02d", i))
	}
	// 52 plans and 52 payment links, all made at one instant (so the pages turn
	// on the id alone), and one of each of another merchant's.
	for i := range 52 {
		if r := b.post("/api/v1/subscriptions/plans/", goldPlan(map[string]any{"name": fmt.Sprintf("Plan%02d", i)})); r.Status != 201 {
			t.Fatalf("plan: %d %s", r.Status, r.Body)
		}
		if r := b.post("/api/v1/paymentlinks/", map[string]any{"title": fmt.Sprintf("Stall %02d", i), "currency": "KES"}); r.Status != 201 {
			t.Fatalf("link: %d %s", r.Status, r.Body)
		}
	}
	other.post("/api/v1/subscriptions/plans/", goldPlan(nil))
	other.post("/api/v1/paymentlinks/", map[string]any{"title": "Elsewhere", "currency": "KES"})
	for _, table := range []string{"plans", "payment_links"} {
		if _, err := db.ExecContext(ctx, `UPDATE `+table+` SET created_at = '2026-01-01T00:00:00Z' WHERE merchant_id = $1`, b.merchant); err != nil {
			t.Fatal(err)
		}
	}
	// 52 deliveries: 26 events to each of two webhooks, recorded in one statement
	// (one created_at), so the pages turn on event and webhook id.
	var hooks []string
	for _, owner := range []*bundle{b, b, other} {
		r := owner.post("/api/v1/webhooks/", map[string]any{"endpoint": "https://hooks.example.com/" + owner.merchant, "challenge": "challenge-1",
			"wallet_transfer_event": true})
		if r.Status != 201 {
			t.Fatalf("webhook: %d %s", r.Status, r.Body)
		}
		hooks = append(hooks, r.Map(t)["id"].(string))
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO webhook_deliveries (event_id, webhook_id, merchant_id, topic, agg_key, src_partition,
			src_offset, body, status)
		SELECT 'evt-' || lpad(i::text, 3, '0'), w, $3, 'wallet_transfer_event', 'W', 0, i, '{}'::bytea, 'FAILED'
		FROM generate_series(1, 26) i, unnest($1::text[]) w
		UNION ALL SELECT 'evt-other', $2, $4, 'wallet_transfer_event', 'W', 0, 1, '{}'::bytea, 'FAILED'`,
		"{"+hooks[0]+","+hooks[1]+"}", hooks[2], b.merchant, other.merchant); err != nil {
		t.Fatal(err)
	}

	cc := newConsoleClient(t, env.BaseURL)
	s := cc.signIn(b.secret, sandboxCookie, nil)
	next := regexp.MustCompile(`<a href="([^"]+)" rel="next">Next 50</a>`)

	t.Run("Wallets", func(t *testing.T) {
		ids, pages := walkPages(t, cc, s, "/console/wallets", regexp.MustCompile(`href="/console/wallets/([^"]+)"`), next)
		if n := unique(t, "wallets", ids, 1); len(n) != 52 || pages != 2 || ids[0] != b.settlement {
			t.Fatalf("%d wallets over %d pages, first %s; want 52 over 2, the settlement wallet first", len(n), pages, ids[0])
		}
	})

	t.Run("Plans", func(t *testing.T) {
		ids, pages := walkPages(t, cc, s, "/console/subscriptions", regexp.MustCompile(`href="[^"]*/subscribe/([A-Za-z0-9]+)/"`),
			regexp.MustCompile(`<a href="([^"]+)" rel="next">Next 50 plans</a>`))
		if n := unique(t, "plans", ids, 1); len(n) != 52 || pages != 2 {
			t.Fatalf("%d plans over %d pages, want 52 over 2", len(n), pages)
		}
	})

	t.Run("PaymentLinks", func(t *testing.T) {
		ids, pages := walkPages(t, cc, s, "/console/payment-links", regexp.MustCompile(`src="/pay/([0-9a-f-]+)/qr.png"`), next)
		if n := unique(t, "links", ids, 1); len(n) != 52 || pages != 2 {
			t.Fatalf("%d links over %d pages, want 52 over 2", len(n), pages)
		}
	})

	t.Run("WebhookDeliveries", func(t *testing.T) {
		ids, pages := walkPages(t, cc, s, "/console/webhooks", regexp.MustCompile(`href="/console/webhooks/events/([^"]+)"`), next)
		n := unique(t, "deliveries", ids, 2) // each event to two webhooks
		if len(ids) != 52 || len(n) != 26 || pages != 2 || n["evt-other"] != 0 {
			t.Fatalf("%d deliveries of %d events over %d pages (another merchant's: %d); want 52 of 26 over 2, none of another's",
				len(ids), len(n), pages, n["evt-other"])
		}
	})

	t.Run("MalformedCursorIsTheFirstPage", func(t *testing.T) {
		for _, path := range []string{"/console/webhooks?after=2026-01-01T00:00:00Z~no-slash", "/console/payment-links?after=2026-01-01T00:00:00Z~not-a-uuid",
			"/console/wallets?after=junk", "/console/subscriptions?plans_after=junk"} {
			if p := cc.page(sandboxCookie, s, path); p.Status != 200 {
				t.Errorf("%s: %d", path, p.Status)
			}
		}
	})
}

// The overview charts, per currency the merchant holds, the money that came in from
// outside and went out in the last 30 days; transfers between its own wallets are
// neither. Known movements: KES deposit 5000, a collection of 300 (in: its net
// amount), a payment file paid out with its charges (out), a transfer of
// 1000 to the merchant's own KES wallet; USD deposit 100 and a transfer of 30
// between its two USD wallets. Another merchant's deposit counts for it alone.
func TestConsoleOverviewMoneyPerCurrency(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, nil)
	b := newBundle(t, env, "Flows")
	other := newBundle(t, env, "Elsewhere")
	other.deposit(t, other.settlement, "777")

	b.deposit(t, b.settlement, "5000")
	float := b.wallet(t, "KES", "Float")
	if r := b.transfer(b.settlement, float, "1000.00"); r.Status != 200 {
		t.Fatalf("transfer: %d %s", r.Status, r.Body)
	}
	invoice := b.collected(t, "300")
	inv := b.waitInvoice(t, invoice)
	net := amt(t, inv["net_amount"])
	if net.Cmp(money.MustParse("300")) >= 0 {
		t.Fatalf("collection: %v", inv)
	}
	before, _ := b.balance(t, b.settlement)
	file := preview(t, b)
	if r := b.post("/api/v1/send-money/approve/", map[string]any{"file_id": file}); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Body)
	}
	waitUntil(t, "the payment file paid", func() bool { return fileStatus(t, b, file) == "COMPLETE" })
	after, _ := b.balance(t, b.settlement)
	// What the file's paid transactions took with their charges (the simulator
	// fails one of its accounts: its hold goes back, and nothing leaves for it).
	paidOut := money.MustParse(before).Sub(money.MustParse(after))
	if paidOut.Sign() <= 0 {
		t.Fatalf("the file took %s from the wallet", paidOut)
	}
	usd, usd2 := b.wallet(t, "USD", "Dollars"), b.wallet(t, "USD", "Dollars Two")
	b.deposit(t, usd, "100")
	if r := b.transfer(usd, usd2, "30.00"); r.Status != 200 {
		t.Fatalf("usd transfer: %d %s", r.Status, r.Body)
	}
	ledgerOK(t, b)

	cc := newConsoleClient(t, env.BaseURL)
	page := cc.page(sandboxCookie, cc.signIn(b.secret, sandboxCookie, nil), "/console")
	if page.Status != 200 {
		t.Fatalf("overview: %d", page.Status)
	}
	figures := func(cur string) (in, out string, ok bool) {
		m := regexp.MustCompile(`id="flow-` + cur + `"[\s\S]*?class="flow-in">` + cur + ` ([0-9.]+)</strong>[\s\S]*?class="flow-out">` +
			cur + ` ([0-9.]+)</strong>`).FindStringSubmatch(page.Body)
		if m == nil {
			return "", "", false
		}
		return m[1], m[2], true
	}
	for _, c := range []struct{ cur, in, out string }{
		{"KES", money.MustParse("5000").Add(net).String(), paidOut.String()},
		{"USD", "100.00", "0.00"},
	} {
		in, out, ok := figures(c.cur)
		if !ok {
			t.Fatalf("no %s chart on the overview:\n%s", c.cur, page.Body)
		}
		if in != c.in || out != c.out {
			t.Errorf("%s: in %s, out %s; want in %s, out %s (own transfers excluded)", c.cur, in, out, c.in, c.out)
		}
	}
	if _, _, ok := figures("EUR"); ok || strings.Count(page.Body, `class="card flow"`) != 2 {
		t.Errorf("charts for currencies the merchant does not hold: %d charts", strings.Count(page.Body, `class="card flow"`))
	}
}
