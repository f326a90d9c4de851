// Package wallet is the wallet aggregate: its state, the messages it accepts, and
// the pure Apply that decides them (Step is Apply in the shape the engine hosts).
//
// Apply is the whole of the behaviour and is tested without the engine. The engine
// hosts each wallet in its one actor shell (actors/engine/aggregate), which adopts a
// new state only when Step succeeded, recovers panics into error results and
// answers with the caller's own correlation id. Durability is not the actor's
// business: the engine writes the resulting snapshot and ledger entries in its
// batch transaction, and a fresh actor is hydrated from that snapshot. Every money
// movement of the service is a step of a wallet: the engine's Tx money API (Hold,
// Release, Debit, Credit) sends these messages, and so do the invoice and payment
// file kinds, which ask their wallet directly (walletkind.Wallets).
package wallet
