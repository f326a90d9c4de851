// Package bench is `paysvc bench`, the load generator behind `make bench` and the
// figures in docs/benchmarks.md.
//
// It measures the real thing: by default it creates a fresh database on the given
// Postgres server, starts `paysvc serve` as a child process of the same binary
// pointed at it, provisions merchants through the admin package and wallets and
// deposits through the HTTP API, then drives intra-wallet transfers over HTTP with
// keep-alive connections. Two shapes of load exercise the two sides of the design's
// partition-per-merchant decision: transfer-spread (many merchants and wallet
// pairs, so several partition workers share the work) and transfer-hot (every
// transfer credits one wallet, so one worker must batch well), with
// transfer-merchant between them (one merchant, 100 wallets, random pairs: one
// worker, no hot row, the high-volume merchant of issue 11). A further scenario,
// stk-collect, runs only when named: M-Pesa STK push collections through the
// sandbox simulator (three engine commands and a rail round trip each), measured
// by the push request and by collections completed end to end (stk.go).
// webhooks, also only when named, measures signed webhook deliveries: a dispatcher
// process of its own drains a backlog of transfer events to local receivers that
// check every signature, then delivers live transfers' events (webhooks.go).
// billing-run, only when named: 100,000 (--subscriptions) ACTIVE subscriptions
// seeded due at one instant, billed by the service's own subscription scheduler,
// one engine command per cycle; it checks the billed count is exact (billing.go).
//
// Figures are only worth something if the money is right, so a run ends with two
// conservation checks: storage.CheckLedger on the database, and a model check that
// every bench wallet holds exactly its deposit plus what the bench's successful
// transfers moved in and out. A failed check makes the command exit non-zero.
//
// For scale it also runs the same transfers as a plain Postgres loop (one
// SELECT ... FOR UPDATE transaction per transfer) on the same server, which is
// what the service must beat, and an open-loop phase at half the measured maximum
// rate, where latency is measured from each request's scheduled time so that a
// stalled server cannot hide its queueing (no coordinated omission).
package bench
