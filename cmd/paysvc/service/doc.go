// Package service assembles paysvc's five roles into one running process:
// configuration from the environment (config.go), the database and its migrations,
// the embedded Kafka when no brokers are configured, the embedded SMTP sink when no
// mail server is, and the listeners. The roles are:
//   - api: the public HTTP listener (package api);
//   - engine: the partition workers that apply commands and commit them (actors/engine);
//   - relay: the outbox relay that publishes committed events to Kafka (actors/outbound/relay);
//   - rails: the payment rails (sandbox simulators or Daraja), their recovery of
//     requests without an outcome, card clearing and the subscription scheduler;
//   - dispatcher: webhook deliveries, payment-file callbacks and webhook-failure mail.
//
// A process runs any subset (PAYSVC_ROLES, serve --roles), so each role scales on its
// own. The binary's `serve` uses this package, and so do the end-to-end tests
// (servicetest) and the benchmark, so what they exercise is exactly what runs.
package service
