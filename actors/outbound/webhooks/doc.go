// Package webhooks holds what a webhook delivery is made of, independent of how it is
// sent: the request body the interface defines ({topic, data}, plus the challenge
// for webhooks that opt in), the X-SERVICE-Signature the spec names (hex
// HMAC-SHA256 of the raw body with the endpoint's challenge), and the Standard
// Webhooks headers (webhook-id, webhook-timestamp, webhook-signature, keyed by a
// separate server-generated whsec_ secret) that let receivers reject replays. The same
// bytes that are signed are the bytes sent, and stored for replay.
package webhooks
