// Package aggregate is the one actor shell of every aggregate instance: each
// wallet, invoice, payment file, refund book and subscription the engine holds in
// memory is a hollywood actor of Actor[S], hosting its kind's pure Step.
//
// Why one shell: the wallet, invoice and payment-file actors were three copies of
// the same forty lines (Request, Get, Restore, a recovered panic), and refunds and
// subscriptions had none (docs/adr/0007-one-aggregate-contract.md). The shell
// serializes an instance's messages (hollywood runs one at a time), adopts a new
// state only when Step succeeds, and turns a panic into a PanicError so the engine
// can set the command that caused it aside.
//
// It imports nothing of paysvc: every aggregate package and the engine may use it.
package aggregate
