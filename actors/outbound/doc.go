// Package outbound groups what leaves paysvc after a commit: relay (the outbox to
// the Kafka event topics), webhooks (signing, the dispatcher, payment-file
// callbacks, the guarded HTTP client) and mail (SMTP and the development sink).
//
// These packages import values, topics and storage, never an aggregate or the
// engine: they deliver what the engine already committed, as stored bytes. api and
// cmd import them (replays, the sandbox mailbox, the roles).
package outbound
