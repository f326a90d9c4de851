package service

import (
	"paysvc/actors/aggregates/invoice/invoicekind"
	"paysvc/actors/aggregates/payout/payoutkind"
	"paysvc/actors/aggregates/refund/refundkind"
	"paysvc/actors/aggregates/subscription/subscriptionkind"
	"paysvc/actors/aggregates/tariff"
	"paysvc/actors/aggregates/wallet/walletkind"
	"paysvc/actors/engine"
)

// Aggregate is one entry of the list: the kind the engine applies. An
// aggregate's HTTP routes are the API's own (api/server.go, routes()).
type Aggregate struct {
	Kind engine.Kind
}

// Aggregates is the one list of the aggregates (docs/adr/0007-one-aggregate-contract.md):
// the engine role applies them (engine.Config.Kinds), the rails role runs their
// sandbox rails (Kind.Simulate).
// A new aggregate adds its line here; the engine itself never names it. It is a
// value, made for each service, so there is no process-wide registry for tests
// to reset; the engine's tests use it too, and a test adds a test-only kind
// through Config.Aggregates. fees is the fee schedule the aggregates that price
// (collections, payment files and subscription cycles) charge by, rates the FX
// table collections and subscription cycles are converted into KES at before they
// are priced; nil is tariff.DefaultSchedule(),
// tariff.DefaultRates().
func Aggregates(fees *tariff.Schedule, rates *tariff.Rates) []Aggregate {
	return []Aggregate{
		{Kind: walletkind.Kind()},
		{Kind: invoicekind.Kind(fees, rates)},
		{Kind: payoutkind.Kind(fees)},
		{Kind: refundkind.Kind()},
		{Kind: subscriptionkind.Kind(fees, rates)},
	}
}

// Kinds is the engine's part of a list.
func Kinds(list []Aggregate) []engine.Kind {
	out := make([]engine.Kind, len(list))
	for i, a := range list {
		out[i] = a.Kind
	}
	return out
}
