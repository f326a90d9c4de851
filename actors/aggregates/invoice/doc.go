// Package invoice is the invoice aggregate of collections: the state of one payment
// request (STK push, collection), the commands that move it through
// PENDING -> PROCESSING -> COMPLETE | FAILED, and the pure Apply that decides them
// (Step, which the engine's one actor shell hosts), and Quote, which converts what
// the customer asked into KES at the configured rates and prices it (Convert, then
// Price): the invoice kind opens each invoice with it, and a fee quote shown before
// any command exists and the API's refusal of an unpriceable payment read it too,
// so the three agree. Money does not move here: when an invoice completes, the engine
// credits the receiving wallet through the wallet aggregate in the same batch
// transaction.
package invoice
