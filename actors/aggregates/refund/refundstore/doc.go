// Package refundstore reads the refund aggregate's stored state (refund_books and
// refunds, written by paysvc_apply_refund in the batch commit) back into
// refund.Book and refund.Refund: for the engine's hydration (refundkind), the
// API's reads and the sandbox refund rail's scan.
//
// It is the refunds' own row mapping, so that storage, which owns the schema and
// the commit, names no aggregate (docs/adr/0007). Every read a merchant
// makes is scoped by the merchant's id.
package refundstore
