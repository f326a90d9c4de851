// Package actors holds everything that runs behind the command log, in four groups
// and one set of leaf packages. The groups and what each may import are kept by
// TestLayers (cmd/paysvc/layers_test.go):
//
//   - values/ (money, ids, ledger): leaf value types every layer may use. They
//     import nothing of paysvc but each other.
//   - engine/ (with its actor shell engine/aggregate and the reply hub
//     engine/replies): the machinery that consumes paysvc.commands.v1 and applies
//     each command to its aggregate exactly once. It names no aggregate; its Tx
//     money API calls the wallet aggregate's own commands.
//   - aggregates/ (wallet, invoice, payout, refund, subscription, and the fee
//     schedule tariff): the business state and decisions, each registered with the
//     engine by its <name>kind package and maps its stored rows in its <name>store
//     package (storage names no aggregate). Only api, cmd and other aggregates
//     import them, besides the engine's money API.
//   - rails/: the role that talks to payment rails (M-Pesa, card, PesaLink,
//     payouts) and feeds outcomes back as commands. It imports no aggregate.
//   - outbound/ (relay, webhooks, mail): what leaves the service after a commit:
//     the outbox relay to the event topics, webhook delivery and payment-file
//     callbacks, email. It imports no aggregate and no engine.
//
// Nothing here imports api or cmd.
package actors
