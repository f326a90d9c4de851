package engine_test

import (
	"encoding/json"
	"testing"

	"paysvc/actors/aggregates/invoice"
	"paysvc/actors/values/ids"
	"paysvc/actors/values/money"
	"paysvc/topics"
)

// An opening command converts what the customer asked behind the log: a USD
// amount opens the invoice a KES amount of its conversion does, and a command of
// the shape the log already holds (a KES amount and no currency field at all)
// opens the same invoice it always did. A currency without a rate is refused on
// the currency field, with the words the API answers a quote with.
func TestInvoiceOpensFromTheCustomersCurrency(t *testing.T) {
	b := setup(t)
	stop := b.startEngine(t, "t1")
	defer stop()
	open := func(payload any) invoice.State {
		t.Helper()
		r := b.send(t, b.command(t, topics.CmdInvoiceSTKPush, b.merchant, payload))
		ok(t, r)
		var inv invoice.State
		if err := json.Unmarshal(r.Result, &inv); err != nil {
			t.Fatal(err)
		}
		return inv
	}
	// The old shape, spelled out so no field of today's payload creeps in.
	old := open(map[string]any{"invoice_id": ids.Alias(12), "phone_number": "254700000001", "amount": "1295.00",
		"tariff": "CUSTOMER-PAYS", "api_ref": "fx"})
	usd := open(topics.InvoiceSTKPush{InvoiceID: ids.Alias(12), Phone: "254700000001", Amount: money.MustParse("10.00"),
		Currency: "USD", Tariff: "CUSTOMER-PAYS", APIRef: "fx"})
	for name, inv := range map[string]invoice.State{"old shape": old, "usd": usd} {
		got := [6]string{inv.Provider, inv.Currency, inv.Tariff, inv.Value.String(), inv.Charges.String(), inv.NetAmount.String()}
		if want := [6]string{"M-PESA", "KES", "CUSTOMER-PAYS", "1315.00", "20.00", "1295.00"}; got != want {
			t.Errorf("%s: invoice %v, want %v", name, got, want)
		}
	}
	r := b.send(t, b.command(t, topics.CmdInvoiceSTKPush, b.merchant, topics.InvoiceSTKPush{InvoiceID: ids.Alias(12),
		Phone: "254700000001", Amount: money.MustParse("10.00"), Currency: "RWF", APIRef: "fx"}))
	wantCode(t, r, "invalid")
	if r.Error.Attr != "currency" || r.Error.Detail != "No exchange rate is configured for RWF." {
		t.Fatalf("RWF refused with %+v", r.Error)
	}
	b.ledgerOK(t)
}
