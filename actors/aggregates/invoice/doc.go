// Package invoice is the invoice aggregate of collections: the state of one payment
// request (STK push, collection), the commands that move it through
// PENDING -> PROCESSING -> COMPLETE | FAILED, and the pure Apply that decides them
// (Step, which the engine's one actor shell hosts). Money does not move here:
// when an invoice completes, the engine credits the receiving wallet through the
// wallet aggregate in the same batch transaction.
package invoice
