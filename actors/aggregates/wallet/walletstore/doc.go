// Package walletstore is the wallet aggregate's row mapping: Row lays a
// wallet.State out as storage.WalletRow, the typed columns the batch commit writes
// (storage.WalletWrites), and the reads scan the wallets table back into
// wallet.State, for the engine's hydration by id and by key (walletkind), the API
// and merchant provisioning.
//
// It belongs to the aggregate, so that storage, which owns the schema and the
// commit, names no aggregate (docs/adr/0007). Every read is scoped by the
// merchant's id.
package walletstore
