package subscription

import (
	"testing"

	"paysvc/actors/aggregates/tariff"
)

// PriceCycle is the one pricing of a cycle: every reason a cycle cannot be
// charged, and the amounts of one that can, in KES and converted.
func TestPriceCycle(t *testing.T) {
	flat, err := tariff.ParseSchedule("CARD=0%+10.00")
	if err != nil {
		t.Fatal(err)
	}
	usdOnly, err := tariff.ParseRates("USD=100")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name                      string
		fees                      *tariff.Schedule
		rates                     *tariff.Rates
		terms                     Terms
		value, charges, net, rate string
		reason                    string
	}{
		{name: "KES, default card fee", terms: Terms{Amount: "1000.00", Currency: "KES"},
			value: "1000.00", charges: "35.00", net: "965.00", rate: "1"},
		{name: "USD converted at the default rate", terms: Terms{Amount: "20.00", Currency: "USD"},
			value: "2590.00", charges: "90.65", net: "2499.35", rate: "129.5"},
		{name: "the configured rates and fees", fees: flat, rates: usdOnly, terms: Terms{Amount: "2.50", Currency: "USD"},
			value: "250.00", charges: "10.00", net: "240.00", rate: "100"},
		{name: "plan gone", terms: Terms{}, reason: "The subscription's plan no longer exists."},
		{name: "amount unparsable", terms: Terms{Amount: "ten", Currency: "KES"}, reason: "The plan's amount cannot be charged."},
		{name: "no rate", rates: usdOnly, terms: Terms{Amount: "10.00", Currency: "EUR"},
			reason: "No exchange rate is configured for EUR."},
		{name: "fee above the amount", fees: flat, terms: Terms{Amount: "5.00", Currency: "KES"},
			reason: "The amount does not cover the card fee."},
		{name: "zero amount", terms: Terms{Amount: "0.00", Currency: "KES"}, reason: "The amount does not cover the card fee."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, reason := PriceCycle(c.fees, c.rates, c.terms)
			if reason != c.reason {
				t.Fatalf("reason %q, want %q", reason, c.reason)
			}
			if c.reason != "" {
				if !got.Value.IsZero() || !got.Charges.IsZero() || !got.NetAmount.IsZero() || got.Rate != "" {
					t.Fatalf("a refused cycle priced %+v", got)
				}
				return
			}
			if got.Value.String() != c.value || got.Charges.String() != c.charges || got.NetAmount.String() != c.net || got.Rate != c.rate {
				t.Fatalf("priced %s / %s / %s at %s, want %s / %s / %s at %s", got.Value, got.Charges, got.NetAmount, got.Rate,
					c.value, c.charges, c.net, c.rate)
			}
		})
	}
}
