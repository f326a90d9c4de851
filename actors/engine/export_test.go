package engine

import "paysvc/actors/values/ledger"

// AddEntryForTest adds a ledger entry to the command's entries as if one of its
// wallet commands had produced it. No wallet command can unbalance a command
// (actors/aggregates/wallet.Apply balances every one), so this test-only seam is how a test
// shows that the engine refuses entries that do not balance (applyRegistered).
func (tx *Tx) AddEntryForTest(e ledger.Entry) { tx.entries = append(tx.entries, e) }
