// Package wallet is the wallet aggregate: its state, the commands it accepts, the
// pure Apply that decides them, and the thin hollywood actor that holds one wallet's
// state between commands.
//
// Apply is the whole of the behaviour and is tested without the actor engine. The
// actor adopts a new state only when Apply succeeded, recovers panics into error
// results (hollywood would otherwise drop the message and restart the actor empty),
// and answers on the caller's own channel with the caller's own correlation id.
// Durability is not the actor's business: the engine writes the resulting snapshot
// and ledger entries in its batch transaction, and a fresh actor is hydrated from
// that snapshot.
package wallet
