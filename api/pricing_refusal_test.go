package api_test

import (
	"strings"
	"testing"

	"paysvc/actors/aggregates/tariff"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// A payment its price refuses changes nothing: the payer it names is not saved
// to the merchant's customers. The invoice kind prices
// behind the log; the edge asks the same function first, so a refusal comes
// before anything is written.
func TestRefusedPriceChangesNothing(t *testing.T) {
	t.Parallel()
	fees, err := tariff.ParseSchedule("M-PESA=0%+10.00;CARD=0%+20.00;PESALINK=0.5%,min=10.00,max=200.00")
	if err != nil {
		t.Fatal(err)
	}
	b := newBundle(t, servicetest.Start(t, func(c *service.Config) { c.API.Fees = fees }), "Acme")
	const email = "refused-payer@example.com"
	r := b.post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254708374149", "amount": "10",
		"email": email, "first_name": "Refused", "last_name": "Payer"})
	if detail, code, attr := errorBody(t, r); r.Status != 400 || code != "invalid" || attr != "amount" ||
		detail != "The amount does not cover the transaction fee." {
		t.Fatalf("payment below its fee: %d %s; want the 400 on amount", r.Status, r.Body)
	}
	if r := b.get("/api/v1/customers/"); r.Status != 200 || strings.Contains(string(r.Body), email) {
		t.Errorf("customers after the refused payment: %d %s; want no %s", r.Status, r.Body, email)
	}
}
