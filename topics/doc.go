// Package topics is the Kafka wire contract of paysvc: topic names, record keys,
// envelopes and codecs. Everything a downstream consumer or a second paysvc process
// needs to read or write a record is here, so changing a wire shape means changing
// this package (and docs/events/), never an ad-hoc struct elsewhere.
//
// Five kinds of topic exist:
//   - paysvc.commands.v1: every write the API accepts, and every outcome the rails
//     and the scheduler feed back, keyed by merchant id so one partition worker owns
//     all of a merchant's aggregates (DESIGN.md decision 1);
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
