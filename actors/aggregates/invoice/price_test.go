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

// Quote's conversion before the price: the KES amount and rate an invoice opens
// with from what the customer asked, or the refusal of a currency without a rate.
func TestQuote(t *testing.T) {
	t.Parallel()
	usdOnly, err := tariff.ParseRates("USD=129.505")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, method, tariff, currency, amount string
		rates                                  *tariff.Rates
		// want: rate, priced KES amount, value, charges, net; or attr and detail.
		rate, amt, value, charges, net string
		attr, detail                   string
	}{
		{name: "kes at 1", method: tariff.MethodMpesa, currency: "KES", amount: "100.00",
			rate: "1", amt: "100.00", value: "100.00", charges: "1.50", net: "98.50"},
		{name: "no currency is kes", method: tariff.MethodMpesa, amount: "100.00",
			rate: "1", amt: "100.00", value: "100.00", charges: "1.50", net: "98.50"},
		{name: "usd card", method: tariff.MethodCard, currency: "USD", amount: "10.00",
			rate: "129.5", amt: "1295.00", value: "1295.00", charges: "45.33", net: "1249.67"},
		{name: "usd mpesa customer pays", method: tariff.MethodMpesa, tariff: tariff.CustomerPays, currency: "USD", amount: "10.00",
			rate: "129.5", amt: "1295.00", value: "1315.00", charges: "20.00", net: "1295.00"},
		{name: "eur converts half-up to cents", method: tariff.MethodCard, currency: "EUR", amount: "19.99",
			rate: "151.2", amt: "3022.49", value: "3022.49", charges: "105.79", net: "2916.70"},
		{name: "usd mpesa rounds the converted amount up", method: tariff.MethodMpesa, currency: "USD", amount: "0.07",
			rate: "129.5", amt: "10.00", value: "10.00", charges: "0.15", net: "9.85"},
		{name: "configured rate, exact half up", method: tariff.MethodCard, currency: "USD", amount: "1.00", rates: usdOnly,
			rate: "129.505", amt: "129.51", value: "129.51", charges: "4.53", net: "124.98"},
		{name: "usd mpesa below 10 once converted", method: tariff.MethodMpesa, currency: "USD", amount: "0.06", attr: "amount",
			detail: "M-Pesa amount must be between KES 10 and KES 150,000 (after conversion to KES)."},
		{name: "usd card above the ceiling once converted", method: tariff.MethodCard, currency: "USD", amount: "7723.00", attr: "amount",
			detail: "Amount must be at most KES 999,999 (after conversion to KES): no payment method collects more."},
		{name: "currency without a rate", method: tariff.MethodCard, currency: "EUR", amount: "10.00", rates: usdOnly,
			attr: "currency", detail: "No exchange rate is configured for EUR."},
		{name: "currency refused before the tariff", method: tariff.MethodCard, tariff: "x", currency: "RWF", amount: "10.00",
			attr: "currency", detail: "No exchange rate is configured for RWF."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := Quote(nil, tt.rates, tt.method, tt.tariff, tt.currency, money.MustParse(tt.amount))
			if tt.detail != "" {
				pe, ok := err.(*PriceError)
				if !ok || pe.Attr != tt.attr || pe.Detail != tt.detail {
					t.Fatalf("Quote = %+v, %v; want refusal %s %q", p, err, tt.attr, tt.detail)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := [5]string{p.Rate, p.Amount.String(), p.Value.String(), p.Charges.String(), p.NetAmount.String()}
			if want := [5]string{tt.rate, tt.amt, tt.value, tt.charges, tt.net}; got != want {
				t.Fatalf("Quote = %v; want %v", got, want)
			}
			// The KES amount priced as it is: Quote is Convert, then Price.
			direct, err := Price(nil, tt.method, tt.tariff, p.Amount)
			if err != nil || !direct.Value.Equal(p.Value) || !direct.Charges.Equal(p.Charges) || !direct.NetAmount.Equal(p.NetAmount) {
				t.Fatalf("Price(%s) = %+v, %v; Quote gave %+v", p.Amount, direct, err, p)
			}
		})
	}
}
