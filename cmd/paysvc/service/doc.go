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
// own. Start is the composition: the set-up every role shares (setup.go), then the
// list of roles, each started by its own file (roles_relay.go, roles_engine.go,
// roles_rails.go, roles_dispatcher.go, roles_api.go; senders.go for the mail sender
// and webhook trust they share), and the listeners last (listeners.go). The
// aggregates are one list, Aggregates (aggregates.go), handed to the engine and the
// rails role as a value. What stays process-wide needs no reset between tests that
// start many services in one process: the Prometheus default registry, and the
// in-process broker listeners (topics/inproc) and reply hubs (engine/replies),
// each keyed by its own service's address or instance id and removed on Close. The binary's `serve` uses this package, and so do the end-to-end tests
// (servicetest) and the benchmark, so what they exercise is exactly what runs.
package service
