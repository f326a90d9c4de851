package storage

// CheckLedgerPaged is CheckLedgerProgress comparing page wallets a statement, so a
// test crosses page boundaries with a few wallets.
var CheckLedgerPaged = checkLedger
