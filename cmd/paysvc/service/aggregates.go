package service

import (
	"sync"

	"paysvc/actors/engine"
	"paysvc/actors/refund/refundkind"
	"paysvc/actors/subscription/subscriptionkind"
)

// registerAggregates is the one list of the aggregates registered with the engine
// (docs/adr/0004-engine-aggregate-registry.md). A new aggregate adds its line here;
// the engine itself never names it. Once per process: tests start many services.
var registerAggregates = sync.OnceFunc(func() {
	engine.Register(refundkind.Kind())
	engine.Register(subscriptionkind.Kind())
})
