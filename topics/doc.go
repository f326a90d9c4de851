// Package topics is the Kafka wire contract of paysvc: topic names, record keys,
// envelopes (Command and Event: id, type, version, merchant, payload) and codecs,
// and the payloads that more than one side shares (wallet commands and events,
// payouts, collections, subscriptions, rail requests, callbacks). The payloads of
// the refund aggregate's commands and events are declared by the refund package
// itself, which alone decides them; they travel in the same envelopes. Every
// record's JSON Schema is in docs/events/, generated from the Go types and checked
// by schema_test.go, so a changed wire shape fails a test until its schema is
// updated.
//
// Five kinds of topic exist:
//   - paysvc.commands.v1: every write the API accepts, and every outcome the rails
//     and the scheduler feed back, keyed by merchant id so one partition worker owns
//     all of a merchant's aggregates (docs/design.md, "Why it is built this way");
//   - paysvc.replies.v1: command results for API instances that are not in the
//     engine's process, keyed by the waiting instance id;
//   - paysvc.events.<webhook topic without _event>.v1 (e.g.
//     paysvc.events.wallet_transfer.v1): domain events relayed from the outbox, at
//     least once, each with a stable event id for consumers to dedupe;
//   - paysvc.rails.<rail>.v1 (mpesa_stk, card, pesalink, payout): requests from the
//     engine's outbox to the rails role, which calls the rail and feeds its outcome
//     back as a command with a derived id. Internal, not webhook topics;
//   - paysvc.callbacks.v1: payment files' callback_url notifications from the
//     engine's outbox to the dispatcher role, keyed by file. Internal.
//
// These are the logical names. On a Kafka cluster that several deployments
// share, each topic (and each consumer group) carries the deployment's prefix,
// PAYSVC_KAFKA_NAMESPACE (Namespace); the names above are the topics of the
// empty namespace.
package topics
