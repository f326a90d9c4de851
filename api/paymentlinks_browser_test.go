package api_test

import (
	"net/url"
	"strings"
	"testing"
)

// A customer pays payment links in the real browser (browsertest/checkout.js): a
// fixed-amount link by M-Pesa, and an amount-0 link where they type the amount
// with the keyboard alone. The merchant then reads each payment session with its
// payment_link.
func TestPaymentLinkInBrowser(t *testing.T) {
	t.Parallel()
	dir := browserDir(t)
	b := setup(t)
	fixed := b.pythonCreateLink(t, map[string]any{"title": "Stall rent March", "amount": 250})
	open := b.pythonCreateLink(t, map[string]any{"title": "Harambee"})
	scenarios := []browserScenario{
		{Name: "paylink-fixed", Kind: "stk", Path: "/pay/" + fixed["id"].(string) + "/", Phone: "0708 374 149"},
		{Name: "paylink-open-amount", Kind: "keyboard", Path: "/pay/" + open["id"].(string) + "/", Phone: "254722000123", Amount: "150"},
	}
	res := runBrowser(t, dir, b.env.BaseURL, scenarios)
	for _, s := range scenarios {
		if r := res[s.Name]; r.Error != nil {
			t.Fatalf("%s: the customer got stuck: %s (seen %q, screenshot in .data/screenshots)", s.Name, *r.Error, r.Seen)
		}
	}
	check := func(name, heading, value string, link map[string]any) {
		t.Helper()
		r := res[name]
		if r.HeadingShown != heading || r.Final != "done" || !strings.Contains(r.FinalText, "KES "+value) {
			t.Fatalf("%s: heading %q, final %s %q", name, r.HeadingShown, r.Final, r.FinalText)
		}
		inv := b.waitInvoice(t, r.Invoice)
		if inv["state"] != "COMPLETE" || inv["value"] != value {
			t.Fatalf("%s: invoice %v", name, inv)
		}
		st := b.post("/api/v1/payment/status/", map[string]any{"invoice_id": r.Invoice})
		pl, _ := st.Map(t)["meta"].(map[string]any)["payment_link"].(map[string]any)
		if pl == nil || pl["id"] != link["id"] || pl["title"] != link["title"] {
			t.Errorf("%s: payment session's payment_link: %s", name, st.Body)
		}
		own, _ := url.Parse(b.env.BaseURL)
		for _, raw := range r.Requests {
			if u, err := url.Parse(raw); err != nil || u.Host != own.Host {
				t.Errorf("%s: the page requested %q, not paysvc", name, raw)
			}
		}
		if len(r.Console) > 0 {
			t.Errorf("%s: console errors: %q", name, r.Console)
		}
	}
	check("paylink-fixed", "Pay KES 250.00", "250.00", fixed)
	check("paylink-open-amount", "Pay in KES", "150.00", open)
}
