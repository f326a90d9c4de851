// Package payoutstore is the payment file aggregate's row mapping: Writes lays a
// batch's changed files out as the rows of paysvc_apply_payout (the generic path
// of the batch commit), and Load and Get read payout_files and
// payout_transactions back into payout.State, for the engine's hydration
// (payoutkind) and the API.
//
// It belongs to the aggregate, so that storage, which owns the schema and the
// commit, names no aggregate (docs/adr/0007). Every read is scoped by the
// merchant's id.
package payoutstore
