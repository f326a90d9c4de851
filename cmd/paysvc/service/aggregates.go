package service

import (
	"sync"

	"paysvc/actors/aggregates/invoice/invoicekind"
	"paysvc/actors/aggregates/payoutfile/payoutkind"
	"paysvc/actors/aggregates/refund/refundkind"
	"paysvc/actors/aggregates/subscription/subscriptionkind"
	"paysvc/actors/aggregates/wallet/walletkind"
	"paysvc/actors/engine"
)

// registerAggregates is the one list of the aggregates registered with the engine
// (docs/adr/0007-one-aggregate-contract.md). A new aggregate adds its line here;
// the engine itself never names it. Once per process: tests start many services.
var registerAggregates = sync.OnceFunc(func() {
	engine.Register(walletkind.Kind())
	engine.Register(invoicekind.Kind())
	engine.Register(payoutkind.Kind())
	engine.Register(refundkind.Kind())
	engine.Register(subscriptionkind.Kind())
})
