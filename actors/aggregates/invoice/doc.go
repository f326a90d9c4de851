// Package invoice is the invoice aggregate of collections: the state of one payment
// request (STK push, collection), the commands that move it through
// PENDING -> PROCESSING -> COMPLETE | FAILED, the pure Apply that decides them, and
// the thin hollywood actor that holds it between commands. Money does not move here:
// when an invoice completes, the engine credits the receiving wallet through the
// wallet aggregate in the same batch transaction.
package invoice
