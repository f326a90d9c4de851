// Package aggregates groups the business aggregates: wallet, invoice, payoutfile,
// refund and subscription, each a package of pure state and decisions plus a
// <name>kind package that registers it with the engine (docs/adr/0007), and tariff,
// the fee schedule they and the API's quotes share.
//
// An aggregate imports values, topics, storage and the engine (its kind package);
// it never imports api, rails or outbound, except api/mount: a kind package may
// declare the kind's HTTP routes with it (types only, no machinery), which the
// service's list hands to the API. What may import an aggregate: api and
// cmd, other aggregates, the engine's generic money API (the wallet's commands),
// and storage's row mapping of the aggregates' stored states.
package aggregates
