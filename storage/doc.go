// Package storage owns the Postgres schema of paysvc and the queries over it.
//
// Migrations are embedded, numbered and forward-only, applied in one transaction
// under an advisory lock so that several processes starting at once migrate once.
// Repositories take sqlx.ExtContext (or a *sqlx.Tx) so they run inside the caller's
// transaction: the engine's batch commit writes snapshots, ledger entries, processed
// command ids, the consumed offset and outbox events in ONE transaction, and the
// version and epoch checks in those statements are what make a stale writer fail.
//
// The batch commit (CommitBatch and CommitBatches, one call of
// paysvc_commit_batches_v3, a prepared statement: one round trip; migration 0035
// made replies and event bodies text, 0039 invoices column arrays) has a fixed
// core, the partition fence and offset, wallets, invoices, ledger entries, processed
// commands with their replies and the outbox, and is generic over every other
// aggregate: each brings an AggregateRows (its kind and its rows as JSON, collected
// by its own type such as InvoiceWrites or PayoutWrites), which the core hands to
// that aggregate's own SQL function paysvc_apply_<kind>(rows jsonb, at timestamptz),
// registered in batch_aggregates by the aggregate's migration. Adding an aggregate
// is its migration, its collector and its handlers' calls: see
// docs/adr/0003-generic-batch-commit.md.
//
// Every read the API makes is scoped by the authenticated merchant id.
package storage
