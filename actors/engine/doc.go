// Package engine is the partition worker of DESIGN.md: it consumes
// paysvc.commands.v1 in a consumer group, routes each command to the hollywood actor
// of its aggregate, and commits each poll's commands of a partition in ONE Postgres
// transaction (snapshots, ledger entries, processed command ids, the consumed
// offset, outbox events). Replies leave only after that commit.
//
// Guarantees, and where they come from:
//   - exactly-once effect: the offset is stored in the batch transaction and a newly
//     assigned partition resumes from it (not from Kafka's committed offset); command
//     ids already in processed_commands are answered from the stored reply;
//   - fencing: claiming a partition bumps its owner epoch, and every batch commit is
//     conditional on that epoch, so a worker that lost the partition cannot commit;
//   - no dual writes: events go to the outbox in the same transaction;
//   - hollywood's failure modes: actors recover panics into errors, correlation ids
//     are our own, each actor has at most one message in flight, and any failed
//     batch throws away the partition's actors so they rehydrate from Postgres.
package engine
