// Package aggregates groups the business aggregates: wallet, invoice, payout,
// refund and subscription, each a package of pure state and decisions, a
// <name>kind package that registers it with the engine (docs/adr/0007) and a
// <name>store package that maps its state to and from its rows (the queries that
// read its State, and its rows of the batch commit); and tariff, the fee schedule
// they and the API's quotes share.
//
// An aggregate imports values, topics, storage and the engine (its kind package);
// it never imports api, rails or outbound. What may import an aggregate: api and
// cmd, other aggregates, and the engine's generic money API (the wallet's
// commands). Storage never does: it owns the schema, the SQL functions and the
// batch commit, and each aggregate's <name>store package maps that aggregate's
// rows.
package aggregates
