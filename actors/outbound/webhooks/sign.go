package webhooks

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Topics a webhook can subscribe to (the spec's flags).
var Topics = []string{"collection_event", "send_money_event", "reversal_event", "wallet_transfer_event", "subscription_event"}

// Body is the exact request body of a delivery: the spec's {topic, data}, and the
// challenge only when one is given (webhooks that opt in to the echo).
func Body(topic string, data json.RawMessage, challenge string) ([]byte, error) {
	return json.Marshal(struct {
		Topic     string          `json:"topic"`
		Data      json.RawMessage `json:"data"`
		Challenge string          `json:"challenge,omitempty"`
	}{topic, data, challenge})
}

// SecretPrefix starts a Standard Webhooks signing secret as shown to merchants.
const SecretPrefix = "whsec_"

// secretBytes is the length of a generated signing key (Standard Webhooks asks
// for 24 to 64 bytes).
const secretBytes = 32

// NewSigningSecret returns fresh random key bytes for webhook-signature.
func NewSigningSecret() ([]byte, error) {
	k := make([]byte, secretBytes)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	return k, nil
}

// FormatSecret is the signing key as merchants see it: whsec_<base64>.
func FormatSecret(key []byte) string { return SecretPrefix + base64.StdEncoding.EncodeToString(key) }

// ParseSecret reads a whsec_<base64> secret back into its key bytes.
func ParseSecret(s string) ([]byte, error) {
	rest, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return nil, errors.New("webhooks: a signing secret starts with " + SecretPrefix)
	}
	k, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(k) < 24 || len(k) > 64 {
		return nil, errors.New("webhooks: a signing secret is whsec_ and the base64 of 24 to 64 bytes")
	}
	return k, nil
}

// EchoesWithdrawnChallenge reports whether a stored delivery body echoes the
// webhook's current challenge although the webhook no longer opts in to the echo
// (include_challenge was turned off after the body was recorded, and the challenge
// was not changed). Such a body is not sent again (docs/security.md, Webhook
// signing): bodies are never rewritten, and sending it would hand the key of
// X-SERVICE-Signature, still in use, to whoever sees the request, against the
// merchant's choice. A body echoing an older challenge is sent as it is: that
// challenge no longer signs anything.
func EchoesWithdrawnChallenge(body []byte, challenge string, includeChallenge bool) bool {
	if includeChallenge || challenge == "" || !bytes.Contains(body, []byte(`"challenge"`)) {
		return false
	}
	var b struct {
		Challenge string `json:"challenge"`
	}
	if json.Unmarshal(body, &b) != nil {
		return false
	}
	return b.Challenge != "" && hmac.Equal([]byte(b.Challenge), []byte(challenge))
}

// WithdrawnChallengeError is what the merchant reads about such a delivery.
const WithdrawnChallengeError = "not sent: the stored body echoes the webhook's current challenge, which it no longer echoes; " +
	"change the challenge (rotate-secret with a new challenge) and replay"

// ServiceSignature is the spec's X-SERVICE-Signature: hex HMAC-SHA256 of the raw
// body, keyed by the endpoint's secret.
func ServiceSignature(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// DeliveryHeaders are every header of a webhook delivery: the spec's
// X-SERVICE-Signature keyed by the challenge, and the Standard Webhooks set, where
// webhook-signature is "v1," + base64 HMAC-SHA256 over
// "<webhook-id>.<webhook-timestamp>.<body>" keyed by the webhook's signing key (the
// bytes behind whsec_). Two keys, so a challenge echoed in a body (opt-in) cannot
// forge webhook-signature.
func DeliveryHeaders(challenge string, key []byte, eventID string, at time.Time, body []byte) map[string]string {
	return SignDelivery(challenge, SigningKeys{Current: key}, eventID, at, body)
}

// SigningKeys are the keys of a webhook's webhook-signature: the current one and,
// for a window after a rotation, the key that rotation retired, so a receiver that
// has not yet deployed the new secret keeps verifying (docs/security.md, Webhook
// signing). Previous signs while the moment of signing is before PreviousUntil.
type SigningKeys struct {
	Current       []byte
	Previous      []byte
	PreviousUntil time.Time
}

// At is the keys that sign at a moment, the current one first.
func (k SigningKeys) At(at time.Time) [][]byte {
	if len(k.Previous) == 0 || !at.Before(k.PreviousUntil) {
		return [][]byte{k.Current}
	}
	return [][]byte{k.Current, k.Previous}
}

// SignDelivery is DeliveryHeaders with every key that signs at the moment at:
// webhook-signature lists one "v1,<signature>" per key, space-separated, the
// current key's first, as Standard Webhooks lets a receiver accept any of them.
// X-SERVICE-Signature stays one value, keyed by the current challenge: the spec's
// header has no list, so a changed challenge has no window.
func SignDelivery(challenge string, keys SigningKeys, eventID string, at time.Time, body []byte) map[string]string {
	ts := strconv.FormatInt(at.Unix(), 10)
	var sigs []string
	for _, key := range keys.At(at) {
		sigs = append(sigs, "v1,"+standardSignature(key, eventID, ts, body))
	}
	return map[string]string{
		"Content-Type":        "application/json",
		"X-SERVICE-Signature": ServiceSignature(challenge, body),
		"webhook-id":          eventID,
		"webhook-timestamp":   ts,
		"webhook-signature":   strings.Join(sigs, " "),
	}
}

// standardSignature is the base64 HMAC-SHA256 of "<id>.<timestamp>.<body>".
func standardSignature(key []byte, eventID, ts string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(eventID + "." + ts + "."))
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Headers signs both ways with one secret (its raw bytes key webhook-signature):
// for payment-file callbacks, which have a single secret.
func Headers(secret, eventID string, at time.Time, body []byte) map[string]string {
	return DeliveryHeaders(secret, []byte(secret), eventID, at, body)
}

// VerifyDelivery checks both signatures of a delivery as a receiver would (tests
// and `paysvc listen` use it): webhook-signature verifies when any of its
// space-separated v1 signatures is key's, as Standard Webhooks says. tolerance
// bounds the timestamp's age.
func VerifyDelivery(challenge string, key []byte, headers map[string]string, body []byte, now time.Time, tolerance time.Duration) bool {
	if !hmac.Equal([]byte(headers["X-SERVICE-Signature"]), []byte(ServiceSignature(challenge, body))) {
		return false
	}
	ts, err := strconv.ParseInt(headers["webhook-timestamp"], 10, 64)
	if err != nil {
		return false
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return false
	}
	want := standardSignature(key, headers["webhook-id"], strconv.FormatInt(ts, 10), body)
	for _, part := range strings.Fields(headers["webhook-signature"]) {
		if sig, ok := strings.CutPrefix(part, "v1,"); ok && hmac.Equal([]byte(sig), []byte(want)) {
			return true
		}
	}
	return false
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

// Verify is VerifyDelivery for what Headers signs (one secret for both).
func Verify(secret string, headers map[string]string, body []byte, now time.Time, tolerance time.Duration) bool {
	return VerifyDelivery(secret, []byte(secret), headers, body, now, tolerance)
}
