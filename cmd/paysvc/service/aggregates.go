package service

import (
	"paysvc/actors/aggregates/invoice/invoicekind"
	"paysvc/actors/aggregates/payoutfile/payoutkind"
	"paysvc/actors/aggregates/refund/refundkind"
	"paysvc/actors/aggregates/subscription/subscriptionkind"
	"paysvc/actors/aggregates/wallet/walletkind"
	"paysvc/actors/engine"
	"paysvc/api"
	"paysvc/api/mount"
)

// Aggregate is one entry of the list: the kind the engine applies and, optional,
// the HTTP routes it brings (api/mount), which the API role mounts beside its
// own. The engine never sees Routes; the API never sees more of the kind than
// its name and Load.
type Aggregate struct {
	Kind   engine.Kind
	Routes func(mount.Mount)
}

// Aggregates is the one list of the aggregates (docs/adr/0007-one-aggregate-contract.md):
// the engine role applies them (engine.Config.Kinds), the rails role runs their
// sandbox rails (Kind.Simulate) and the API role mounts their routes (Routes).
// A new aggregate adds its line here; the engine itself never names it. It is a
// value, made for each service, so there is no process-wide registry for tests
// to reset; the engine's tests use it too, and a test adds a test-only kind
// through Config.Aggregates. The built-in aggregates' routes are api/server.go's
// own (routes()): none of these brings Routes.
func Aggregates() []Aggregate {
	return []Aggregate{
		{Kind: walletkind.Kind()},
		{Kind: invoicekind.Kind()},
		{Kind: payoutkind.Kind()},
		{Kind: refundkind.Kind()},
		{Kind: subscriptionkind.Kind()},
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

// KindRoutes is the API's part of a list: the routes of the kinds that bring some.
func KindRoutes(list []Aggregate) []api.KindRoutes {
	var out []api.KindRoutes
	for _, a := range list {
		if a.Routes != nil {
			out = append(out, api.KindRoutes{Name: a.Kind.Name, Load: a.Kind.Load, Routes: a.Routes})
		}
	}
	return out
}
