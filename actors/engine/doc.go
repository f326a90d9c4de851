// Package engine is the partition worker (docs/design.md): it consumes
// paysvc.commands.v1 in a consumer group and is the only writer of every aggregate
// of the partitions it owns. It exists so that money state changes in one place, in
// command order, exactly once, and only with a commit behind every reply.
//
// A command's path:
//   - the guard (guard.go) checks it against its merchant before anything runs: the
//     producer's environment is the merchant's, a simulator's outcome never reaches
//     a live merchant, sandbox-only commands stay in the sandbox, a disabled
//     merchant moves no new money (docs/security.md, "Guards of the money-moving
//     commands"); a refusal is answered and not recorded;
//   - hydration (instances.go) makes live, before any command of the batch
//     applies, every aggregate instance its commands name or need, and those
//     these refer to, reads which new ids another merchant holds (Kind.Taken:
//     such a command is refused, never failed on the primary key) and the facts
//     the kinds' Prepare asks for: no command reads the database while it applies;
//   - its command's apply works through a Tx (tx.go). Each aggregate declares
//     itself with Define (define.go): its state type, its store, and one On per
//     command with the command's guard, the ids it touches and its apply, all typed
//     by the payload; the engine sees the result as a Kind (kind.go) and is given
//     them as a value, Config.Kinds, built by one list (cmd/paysvc/service's
//     Aggregates; there is no process-wide registry). Each hosted instance is a
//     hollywood actor of the one shell
//     (actors/engine/aggregate) hosting its kind's pure Step, and a command touching two
//     instances (a transfer's two accounts, an approval's file and its hold) is
//     atomic: a refusal puts every instance back. The Tx gathers the new states,
//     balanced ledger entries, outbox events and the reply into the open batch;
//   - everything one poll applied, across all the partitions this engine owns, is
//     committed in ONE Postgres transaction (docs/adr/0005-one-commit-per-poll.md):
//     snapshots (version-checked), ledger entries, processed command ids with their
//     replies, each partition's consumed offset under its owner epoch, and outbox
//     events. If that transaction fails, each partition's batch is committed on its
//     own so each gets its own outcome. Replies leave only after the commit.
//
// Guarantees, and where they come from:
//   - exactly-once effect: the offset is stored in the batch transaction and a newly
//     assigned partition resumes from it (not from Kafka's committed offset); command
//     ids already in processed_commands are answered from the stored reply;
//   - fencing: claiming a partition bumps its owner epoch, and every commit is
//     conditional on that epoch, so a worker that lost the partition cannot commit;
//   - no dual writes: events go to the outbox in the same transaction;
//   - a poison command is answered, not retried: a batch that fails for a reason
//     retrying cannot fix is halved until the command is found, which is committed
//     with a refusal and recorded in command_quarantine (quarantine.go);
//   - hollywood's failure modes: actors recover panics into errors, correlation ids
//     are our own, each actor has at most one message in flight, and any failed
//     batch throws away the partition's actors so they rehydrate from Postgres;
//   - memory follows the active set: an actor idle for PAYSVC_ENGINE_IDLE_AFTER
//     with nothing in flight is stopped, and rehydrated from its snapshot when a
//     command next names it.
package engine
