// Package service assembles paysvc's roles (api, engine, relay) into one running
// process: configuration from the environment, the database and its migrations,
// the embedded Kafka when no brokers are configured, and the HTTP listener. The
// binary's `serve` uses it, and so do the end-to-end tests and the benchmark, so
// what they exercise is exactly what runs.
package service
