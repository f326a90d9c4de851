package invoice

import (
	"testing"

	"paysvc/actors/aggregates/tariff"
	"paysvc/actors/values/money"
)

// Price's rules, case by case: the amounts an invoice opens with, or the field
// and words a collection is refused with.
func TestPrice(t *testing.T) {
	t.Parallel()
	fixed, err := tariff.ParseSchedule("M-PESA=0%+10.00;CARD=0%+10.00")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, method, tariff, amount string
		fees                         *tariff.Schedule
		// want: priced amount, value, charges, net; or attr and detail of the refusal.
		amt, value, charges, net string
		attr, detail             string
	}{
		{name: "mpesa business pays", method: tariff.MethodMpesa, amount: "100.00",
			amt: "100.00", value: "100.00", charges: "1.50", net: "98.50"},
		{name: "mpesa rounds the amount up", method: tariff.MethodMpesa, tariff: tariff.BusinessPays, amount: "100.40",
			amt: "101.00", value: "101.00", charges: "1.52", net: "99.48"},
		{name: "mpesa customer pays rounds the prompt up, into the charges", method: tariff.MethodMpesa,
			tariff: tariff.CustomerPays, amount: "1295.00", amt: "1295.00", value: "1315.00", charges: "20.00", net: "1295.00"},
		{name: "mpesa below 10 after rounding", method: tariff.MethodMpesa, amount: "9.00", attr: "amount",
			detail: "M-Pesa amount must be between KES 10 and KES 150,000 (after conversion to KES)."},
		{name: "mpesa 9.01 rounds to 10", method: tariff.MethodMpesa, amount: "9.01",
			amt: "10.00", value: "10.00", charges: "0.15", net: "9.85"},
		{name: "mpesa above 150,000 after rounding", method: tariff.MethodMpesa, amount: "150000.01", attr: "amount",
			detail: "M-Pesa amount must be between KES 10 and KES 150,000 (after conversion to KES)."},
		{name: "mpesa fee takes it all", method: tariff.MethodMpesa, amount: "10.00", fees: fixed, attr: "amount",
			detail: "The amount does not cover the transaction fee."},
		{name: "mpesa unknown tariff", method: tariff.MethodMpesa, tariff: "X", amount: "10.00", attr: "mobile_tarrif",
			detail: "mobile_tarrif must be BUSINESS-PAYS or CUSTOMER-PAYS."},
		{name: "card business pays", method: tariff.MethodCard, amount: "1234.56",
			amt: "1234.56", value: "1234.56", charges: "43.21", net: "1191.35"},
		{name: "card customer pays, no rounding", method: tariff.MethodCard, tariff: tariff.CustomerPays, amount: "1234.56",
			amt: "1234.56", value: "1277.77", charges: "43.21", net: "1234.56"},
		{name: "card at the ceiling", method: tariff.MethodCard, amount: "999999.00",
			amt: "999999.00", value: "999999.00", charges: "34999.97", net: "964999.03"},
		{name: "card above the ceiling", method: tariff.MethodCard, amount: "999999.01", attr: "amount",
			detail: "Amount must be at most KES 999,999 (after conversion to KES): no payment method collects more."},
		{name: "card fee takes it all", method: tariff.MethodCard, amount: "10.00", fees: fixed, attr: "amount",
			detail: "The amount does not cover the CARD fee."},
		{name: "card unknown tariff", method: tariff.MethodCard, tariff: "x", amount: "10.00", attr: "card_tarrif",
			detail: "card_tarrif must be BUSINESS-PAYS or CUSTOMER-PAYS."},
		{name: "pesalink capped fee", method: tariff.MethodPesalink, amount: "50000.00",
			amt: "50000.00", value: "50000.00", charges: "200.00", net: "49800.00"},
		{name: "pesalink minimum fee, customer pays", method: tariff.MethodPesalink, tariff: tariff.CustomerPays, amount: "100.00",
			amt: "100.00", value: "110.00", charges: "10.00", net: "100.00"},
		{name: "pesalink not in the schedule", method: tariff.MethodPesalink, amount: "100.00", fees: fixed, attr: "method",
			detail: "This server does not collect by PESALINK."},
		{name: "no amount", method: tariff.MethodCard, amount: "0.00", attr: "amount", detail: "Amount must be greater than 0."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := Price(tt.fees, tt.method, tt.tariff, money.MustParse(tt.amount))
			if tt.detail != "" {
				pe, ok := err.(*PriceError)
				if !ok || pe.Attr != tt.attr || pe.Detail != tt.detail {
					t.Fatalf("Price = %+v, %v; want refusal %s %q", p, err, tt.attr, tt.detail)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := [4]string{p.Amount.String(), p.Value.String(), p.Charges.String(), p.NetAmount.String()}
			if got != [4]string{tt.amt, tt.value, tt.charges, tt.net} {
				t.Fatalf("Price = %v; want %v", got, [4]string{tt.amt, tt.value, tt.charges, tt.net})
			}
			if !p.Value.Equal(p.NetAmount.Add(p.Charges)) {
				t.Fatalf("value %s != net %s + charges %s", p.Value, p.NetAmount, p.Charges)
			}
		})
	}
}
