package service

import (
	"sync"

	"paysvc/actors/engine"
	"paysvc/actors/invoice/invoicekind"
	"paysvc/actors/payoutfile/payoutkind"
	"paysvc/actors/refund/refundkind"
	"paysvc/actors/subscription/subscriptionkind"
	"paysvc/actors/wallet/walletkind"
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
