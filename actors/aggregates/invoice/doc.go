// Package invoice is the invoice aggregate of collections: the state of one payment
// request (STK push, collection), the commands that move it through
// PENDING -> PROCESSING -> COMPLETE | FAILED, and the pure Apply that decides them
// (Step, which the engine's one actor shell hosts), and Price, which prices a
// collection from what the customer asked: the invoice kind opens each invoice
// with it, and a fee quote shown before any command exists reads it too, so the
// two agree. Money does not move here: when an invoice completes, the engine
// credits the receiving wallet through the wallet aggregate in the same batch
// transaction.
package invoice
