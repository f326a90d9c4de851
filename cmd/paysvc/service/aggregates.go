package service

import (
	"paysvc/actors/aggregates/invoice/invoicekind"
	"paysvc/actors/aggregates/payoutfile/payoutkind"
	"paysvc/actors/aggregates/refund/refundkind"
	"paysvc/actors/aggregates/subscription/subscriptionkind"
	"paysvc/actors/aggregates/wallet/walletkind"
	"paysvc/actors/engine"
)

// Aggregates is the one list of the aggregates (docs/adr/0007-one-aggregate-contract.md):
// the engine role applies them (engine.Config.Kinds) and the rails role runs
// their sandbox rails (Kind.Simulate). A new aggregate adds its line here; the
// engine itself never names it. It is a value, made for each service, so there is
// no process-wide registry for tests to reset; the engine's tests use it too.
func Aggregates() []engine.Kind {
	return []engine.Kind{
		walletkind.Kind(),
		invoicekind.Kind(),
		payoutkind.Kind(),
		refundkind.Kind(),
		subscriptionkind.Kind(),
	}
}
