// Package webhooks holds what a webhook delivery is made of, independent of how it is
// sent: the request body the interface defines ({topic, data, challenge}), the
// X-SERVICE-Signature the spec names (hex HMAC-SHA256 of the raw body with the
// endpoint's secret), and the Standard Webhooks headers (webhook-id,
// webhook-timestamp, webhook-signature) that let receivers reject replays. The same
// bytes that are signed are the bytes sent, and stored for replay.
package webhooks
