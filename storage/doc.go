// Package storage owns the Postgres schema of paysvc and the queries over it.
//
// Migrations are embedded, numbered and forward-only, applied in one transaction
// under an advisory lock so that several processes starting at once migrate once.
// The SQL functions that run (the batch commit and each aggregate's function) are
// not written in them: each is one file of functions/, a CREATE OR REPLACE that
// the same transaction applies after the numbered migrations whenever its checksum
// differs from the one recorded in schema_functions, so the file is what runs
// (docs/adr/0008-repeatable-functions.md). Open functions/ to read the commit.
// Repositories take sqlx.ExtContext (or a *sqlx.Tx) so they run inside the caller's
// transaction: the engine's batch commit writes snapshots, ledger entries, processed
// command ids, the consumed offset and outbox events in ONE transaction, and the
// version and epoch checks in those statements are what make a stale writer fail.
//
// The batch commit (CommitBatch and CommitBatches, one call of
// paysvc_commit_batches_v3, functions/paysvc_commit_batches_v3.sql, a prepared
// statement: one round trip; replies and event bodies as text, wallets and invoices
// as column arrays; _v4, the same with the outbox's trace contexts, only when an
// event is traced) has a fixed core, the partition fence and offset, wallets,
// invoices, ledger entries, processed commands with their replies and the outbox,
// and is generic over every other aggregate: each brings an AggregateRows (its kind
// and its rows as JSON, collected by its own type such as payoutstore.Writes), which
// the core hands to that aggregate's own SQL function paysvc_apply_<kind>(rows jsonb,
// at timestamptz), in functions/paysvc_apply_<kind>.sql, its kind registered in
// batch_aggregates by the aggregate's migration. What an aggregate brings here is
// its migration and its function file; its collector and reads live in its own
// <name>store package (how to add one: docs/adr/0007-one-aggregate-contract.md,
// "How to add an aggregate").
//
// Storage names no aggregate (cmd/paysvc/layers_test.go). The core's wallets and
// invoices are its own plain rows (WalletRow, InvoiceRow) that the aggregates fill,
// and the queries that read an aggregate's state back into its type live in that
// aggregate's <name>store package (actors/aggregates/wallet/walletstore,
// invoicestore, payoutstore, refundstore, subscriptionstore), on the helpers here
// (ErrNotFound, Owned). What stays here are the schema, the commit and the queries
// that need no aggregate's type: merchants, the outbox, offsets, webhooks,
// idempotency, the rails' and schedulers' scans (their rows are storage's own
// types), and the like.
//
// Every read the API makes is scoped by the authenticated merchant id.
package storage
