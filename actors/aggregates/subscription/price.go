package subscription

import (
	"paysvc/actors/aggregates/tariff"
	"paysvc/actors/values/money"
)

// Charge is a cycle's card charge in KES: what the card is charged (Value), the
// card fee (Charges) and what the merchant's wallet is credited (NetAmount), and
// the KES per unit of the plan's currency it was converted at (Rate).
type Charge struct {
	Value, Charges, NetAmount money.Amount
	Rate                      string
}

// PriceCycle prices a cycle of the plan's terms as a card collection is priced:
// the amount converted into KES at rates, the card fee taken from it
// (BUSINESS-PAYS). It is pure, so the subscription kind prices each cycle when it
// applies it, by the fees and rates it was configured with, and a replayed
// command prices the same. reason, when not "", is why the cycle cannot be
// charged: the cycle fails with it and is retried at the next date. A nil fees or
// rates is tariff.DefaultSchedule or tariff.DefaultRates.
func PriceCycle(fees *tariff.Schedule, rates *tariff.Rates, t Terms) (c Charge, reason string) {
	if fees == nil {
		fees = tariff.DefaultSchedule()
	}
	if rates == nil {
		rates = tariff.DefaultRates()
	}
	if t.Amount == "" {
		return Charge{}, "The subscription's plan no longer exists."
	}
	amount, err := money.Parse(t.Amount)
	if err != nil {
		return Charge{}, "The plan's amount cannot be charged."
	}
	kes, rate, err := rates.ToKES(t.Currency, amount)
	if err != nil {
		return Charge{}, "No exchange rate is configured for " + t.Currency + "."
	}
	q, err := fees.Quote(tariff.MethodCard, tariff.BusinessPays, kes)
	if err != nil {
		return Charge{}, "The amount does not cover the card fee."
	}
	return Charge{Value: q.Value, Charges: q.Charges, NetAmount: q.NetAmount, Rate: rate}, ""
}
