// Package ledger holds the double-entry vocabulary shared by every aggregate: an
// Entry posts a signed amount to one account, and a movement is a set of entries
// that sums to zero in each currency. Balanced is the check the engine runs on
// every command's entries before they can reach the batch transaction, so a bug in
// one aggregate's apply cannot invent or lose money.
package ledger
