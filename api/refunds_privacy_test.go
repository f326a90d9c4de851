package api_test

import (
	"context"
	"strings"
	"testing"

	"paysvc/cmd/paysvc/admin"
	"paysvc/cmd/paysvc/service/servicetest"
)

// A refund's invoice carries the payer's phone as its account. A key made to
// file and follow refunds (add_refunds, view_refunds) is not a key that reads
// payers (view_collections): every refund answer it gets, created, read, listed
// or cancelled, shows the phone masked, while the merchant's unrestricted key
// reads it in full (docs/security.md, "Payer data by principal").
func TestRefundAnswersHideThePayerWithoutViewCollections(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inv := b.collected(t, "500")
	const phone = "254708374149" // the collected helper's payer
	k, err := admin.CreateKey(context.Background(), b.env.Schema.DB, b.merchant, []string{"add_refunds", "view_refunds"})
	if err != nil {
		t.Fatal(err)
	}
	refunds := servicetest.Bearer(k.Key)

	account := func(t *testing.T, v any) string {
		t.Helper()
		m, _ := v.(map[string]any)
		tx, _ := m["transaction"].(map[string]any)
		in, _ := tx["invoice"].(map[string]any)
		a, ok := in["account"].(string)
		if !ok {
			t.Fatalf("no transaction.invoice.account in %v", v)
		}
		return a
	}
	hidden := func(t *testing.T, what string, v any) {
		t.Helper()
		if a := account(t, v); a == phone || strings.Contains(a, "08374") || a != "2547****4149" {
			t.Fatalf("%s: account %q shown to a key without view_collections, want 2547****4149", what, a)
		}
	}

	r := b.env.Do("POST", "/api/v1/chargebacks/", map[string]any{"invoice": inv, "amount": "100", "reason": "Wrong service",
		"reason_details": "privacy"}, refunds...)
	id := refundID(t, r)
	hidden(t, "create", r.Map(t))
	if strings.Contains(string(r.Body), phone) {
		t.Fatalf("create answer carries the phone: %s", r.Body)
	}

	g := b.env.Do("GET", "/api/v1/chargebacks/"+id+"/", nil, refunds...)
	if g.Status != 200 {
		t.Fatalf("get: %d %s", g.Status, g.Body)
	}
	hidden(t, "get", g.Map(t))

	l := b.env.Do("GET", "/api/v1/chargebacks/", nil, refunds...)
	if l.Status != 200 || strings.Contains(string(l.Body), phone) {
		t.Fatalf("list: %d %s", l.Status, l.Body)
	}
	results, _ := l.Map(t)["results"].([]any)
	if len(results) != 1 {
		t.Fatalf("list: want 1 refund, got %s", l.Body)
	}
	hidden(t, "list", results[0])

	// The merchant's own unrestricted key reads the payer in full.
	if a := account(t, b.get("/api/v1/chargebacks/"+id+"/").Map(t)); a != phone {
		t.Fatalf("unrestricted key reads account %q, want %s", a, phone)
	}

	c := b.env.Do("POST", "/api/v1/chargebacks/"+id+"/cancel/", nil, refunds...)
	if c.Status != 200 {
		t.Fatalf("cancel: %d %s", c.Status, c.Body)
	}
	hidden(t, "cancel", c.Map(t))
}
