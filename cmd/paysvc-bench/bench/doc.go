// Package bench is `paysvc-bench`, the load generator behind `make bench`,
// `make bench-memory` and the figures in docs/benchmarks.md. It is its own command
// so that the service binary links none of it.
//
// It measures the real thing: by default it creates a fresh database on the given
// Postgres server, starts `paysvc serve` of the service's binary (Options.Service,
// bin/paysvc under make bench) as a child process pointed at it (or, with --url
// and --metrics-url, drives a service already running), provisions merchants through the admin package and wallets and deposits
// through the HTTP API, then drives the scenarios over HTTP with keep-alive
// connections.
//
// The default run (Scenarios, in order) is the design's partition-per-merchant
// decision from both sides, then payouts:
//   - transfer-spread: many merchants and wallet pairs, so several partition workers
//     share the work;
//   - transfer-merchant: one merchant, 100 wallets, random pairs: one worker, no hot
//     row, a high-volume merchant;
//   - transfer-hot: every transfer credits one wallet, so one worker must batch well;
//   - payout-file: payment files end to end through the sandbox payout rail
//     (payout.go).
//
// Scenarios that run only when --scenario names them (OptionalScenarios):
//   - stk-collect: M-Pesa STK push collections through the sandbox simulator (three
//     engine commands and a rail round trip each), measured by the push request and
//     by collections completed end to end (stk.go);
//   - webhooks: signed webhook deliveries: a dispatcher process of its own drains a
//     backlog of transfer events to local receivers that check every signature,
//     then delivers live transfers' events (webhooks.go);
//   - billing-run: --subscriptions ACTIVE subscriptions seeded due at one instant,
//     billed by the service's own subscription scheduler, one engine command per
//     cycle; it checks the billed count is exact (billing.go);
//   - wallets-1m: the service's memory with --memory-wallets wallets of which
//     --memory-active are used, then idle for passivation (memory.go).
//
// Figures are only worth something if the money is right, so a run ends with two
// conservation checks: storage.CheckLedger on the database, and a model check that
// every bench wallet holds exactly its deposit plus what the bench's successful
// transfers moved in and out. A failed check makes the command exit non-zero.
//
// For scale, the transfer scenarios also run against a baseline (--baseline, on by
// default): a plain net/http service doing one SELECT ... FOR UPDATE transaction per
// transfer (httpbase.go), a child process driven by the same client on the same
// wallets; --baseline-sql-loop adds the same loop in-process without HTTP. An
// open-loop phase at half the measured maximum rate (--half-rate-duration) measures
// latency from each request's scheduled time, so that a stalled server cannot hide
// its queueing (no coordinated omission).
package bench
