// Package payout is the payment-file aggregate of payouts ("send money"): one
// file and its transactions, the commands that move them (Create, Approve, Cancel,
// and Results: the rail's outcomes of its transactions, which is also how a
// transaction fails), the pure Apply that decides them, and Step, which the
// engine's one actor shell (actors/engine/aggregate) hosts between commands. Its
// registration with the engine is payoutkind, its rows and SQL reads payoutstore.
//
// A file holds its money through its wallet: on approval the engine holds the
// file's total plus charges in the debited wallet, and every transaction outcome
// Apply reports (Delta) tells the engine what to pay out of the hold or release.
// Apply keeps the file's own count of what is still held, so that at COMPLETE
// nothing can be left over: the hold is zero or Apply refuses.
package payout
