// Package values groups the leaf packages: money (exact decimal amounts and
// currencies), ids (identifiers and derived ids), ledger (balanced double-entry
// postings) and every (the runner of the periodic jobs, and their catalogue).
// Every layer may import them (api, storage, topics, the engine, the aggregates,
// the rails and outbound delivery) because they import nothing of paysvc but each
// other: a value never pulls a layer in with it. waittest, the tests' one way to
// wait (Eventually, and a clock moved by hand), sits here for the same reason: the
// tests of every layer, and their fixtures, use it.
package values
