package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"
)

// Topics a webhook can subscribe to (the spec's flags).
var Topics = []string{"collection_event", "send_money_event", "reversal_event", "wallet_transfer_event", "subscription_event"}

// Body is the exact request body of a delivery.
func Body(topic string, data json.RawMessage, challenge string) ([]byte, error) {
	return json.Marshal(struct {
		Topic     string          `json:"topic"`
		Data      json.RawMessage `json:"data"`
		Challenge string          `json:"challenge"`
	}{topic, data, challenge})
}

// Rechallenge returns a stored delivery body with its challenge replaced and the
// topic and data bytes kept as they are (used when a webhook's secret changes, so
// no stored body keeps carrying the old secret).
func Rechallenge(body []byte, challenge string) ([]byte, error) {
	var b struct {
		Topic string          `json:"topic"`
		Data  json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, err
	}
	return Body(b.Topic, b.Data, challenge)
}

// ServiceSignature is the spec's X-SERVICE-Signature: hex HMAC-SHA256 of the raw
// body, keyed by the endpoint's secret.
func ServiceSignature(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Headers are every header of a delivery: the spec's signature and the Standard
// Webhooks set, where webhook-signature is "v1," + base64 HMAC-SHA256 over
// "<webhook-id>.<webhook-timestamp>.<body>" keyed by the same secret (the raw secret
// bytes; no whsec_ prefix is involved).
func Headers(secret, eventID string, at time.Time, body []byte) map[string]string {
	ts := strconv.FormatInt(at.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(eventID + "." + ts + "."))
	m.Write(body)
	return map[string]string{
		"Content-Type":        "application/json",
		"X-SERVICE-Signature": ServiceSignature(secret, body),
		"webhook-id":          eventID,
		"webhook-timestamp":   ts,
		"webhook-signature":   "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)),
	}
}

// Verify checks both signatures of a delivery as a receiver would (tests and
// `paysvc listen` use it). tolerance bounds the timestamp's age.
func Verify(secret string, headers map[string]string, body []byte, now time.Time, tolerance time.Duration) bool {
	if !hmac.Equal([]byte(headers["X-SERVICE-Signature"]), []byte(ServiceSignature(secret, body))) {
		return false
	}
	ts, err := strconv.ParseInt(headers["webhook-timestamp"], 10, 64)
	if err != nil {
		return false
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return false
	}
	want := Headers(secret, headers["webhook-id"], time.Unix(ts, 0), body)["webhook-signature"]
	return hmac.Equal([]byte(headers["webhook-signature"]), []byte(want))
}

// CallbackSecretName is the service secret (storage.ServiceSecret) from which every
// payment file's callback secret derives.
const CallbackSecretName = "payout_callback_signing"

// CallbackSecret is the secret that signs a payment file's callbacks: HMAC-SHA256
// of the file id under the service's own key, so it is 256 bits no one can guess
// from the file, differs for every file, and needs no storage (the dispatcher
// derives it again when delivering). The merchant gets it once, in the initiation
// answer (callback_secret); it never travels in a callback or an event.
func CallbackSecret(serviceKey []byte, fileID string) string {
	m := hmac.New(sha256.New, serviceKey)
	m.Write([]byte("paysvc payment-file callback\x00" + fileID))
	return "pcs_" + hex.EncodeToString(m.Sum(nil))
}
