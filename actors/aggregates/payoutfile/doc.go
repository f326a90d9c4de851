// Package payoutfile is the payment-file aggregate of payouts ("send money"): one
// file and its transactions, the commands that move them (Create, Approve, Cancel,
// and Results: the rail's outcomes of its transactions, which is also how a
// transaction fails), the pure Apply that decides them, and the thin hollywood
// actor that holds a file between commands.
//
// A file holds its money through its wallet: on approval the engine holds the
// file's total plus charges in the debited wallet, and every transaction outcome
// Apply reports (Delta) tells the engine what to pay out of the hold or release.
// Apply keeps the file's own count of what is still held, so that at COMPLETE
// nothing can be left over: the hold is zero or Apply refuses.
package payoutfile
