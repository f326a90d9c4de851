// Package storage owns the Postgres schema of paysvc and the queries over it.
//
// Migrations are embedded, numbered and forward-only, applied in one transaction
// under an advisory lock so that several processes starting at once migrate once.
// Repositories take sqlx.ExtContext (or a *sqlx.Tx) so they run inside the caller's
// transaction: the engine's batch commit writes snapshots, ledger entries, processed
// command ids, the consumed offset and outbox events in ONE transaction, and the
// version and epoch checks in those statements are what make a stale writer fail.
//
// Every read the API makes is scoped by the authenticated merchant id.
package storage
