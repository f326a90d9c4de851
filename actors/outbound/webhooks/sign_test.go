package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
	"time"
)

func TestSignatures(t *testing.T) {
	t.Parallel()
	body, err := Body("collection_event", []byte(`{"id":"INV1","state":"COMPLETE"}`), "my-challenge")
	if err != nil {
		t.Fatal(err)
	}
	if string(body) != `{"topic":"collection_event","data":{"id":"INV1","state":"COMPLETE"},"challenge":"my-challenge"}` {
		t.Fatalf("body %s", body)
	}
	at := time.Unix(1_800_000_000, 0)
	h := Headers("s3cret", "evt_1", at, body)
	// Computed independently, as an integrator's receiver would.
	m := hmac.New(sha256.New, []byte("s3cret"))
	m.Write(body)
	if h["X-SERVICE-Signature"] != hex.EncodeToString(m.Sum(nil)) {
		t.Fatal("X-SERVICE-Signature is not hex HMAC-SHA256 of the body")
	}
	m = hmac.New(sha256.New, []byte("s3cret"))
	m.Write([]byte("evt_1.1800000000." + string(body)))
	if h["webhook-signature"] != "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)) || h["webhook-id"] != "evt_1" ||
		h["webhook-timestamp"] != "1800000000" {
		t.Fatalf("standard webhooks headers %v", h)
	}
	if !Verify("s3cret", h, body, at.Add(time.Minute), 5*time.Minute) {
		t.Fatal("a fresh, intact delivery does not verify")
	}
	for name, tc := range map[string]struct {
		secret string
		body   []byte
		now    time.Time
	}{
		"WrongSecret":  {"other", body, at},
		"TamperedBody": {"s3cret", []byte(strings.Replace(string(body), "COMPLETE", "FAILED", 1)), at},
		"Replayed":     {"s3cret", body, at.Add(time.Hour)},
	} {
		if Verify(tc.secret, h, tc.body, tc.now, 5*time.Minute) {
			t.Errorf("%s verifies", name)
		}
	}
}

// standardVerify is the Standard Webhooks receiver's check, written from the
// specification: HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>" under the
// key, base64, equal to any of the header's space-separated "v1,<signature>".
func standardVerify(key []byte, h map[string]string, body []byte) bool {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(h["webhook-id"] + "." + h["webhook-timestamp"] + "." + string(body)))
	want := base64.StdEncoding.EncodeToString(m.Sum(nil))
	for _, part := range strings.Split(h["webhook-signature"], " ") {
		if v, sig, ok := strings.Cut(part, ","); ok && v == "v1" && hmac.Equal([]byte(sig), []byte(want)) {
			return true
		}
	}
	return false
}

// While a rotation's window lasts, webhook-signature carries the new key's
// signature and then the retired key's; from its end, the new key's alone.
// X-SERVICE-Signature is one value throughout.
func TestSignDeliveryWithTwoKeys(t *testing.T) {
	t.Parallel()
	newKey, oldKey := []byte(strings.Repeat("n", 32)), []byte(strings.Repeat("o", 32))
	until := time.Unix(1_800_000_600, 0)
	keys := SigningKeys{Current: newKey, Previous: oldKey, PreviousUntil: until}
	body := []byte(`{"topic":"collection_event","data":{"id":"INV1"}}`)
	at := time.Unix(1_800_000_000, 0)

	h := SignDelivery("my-challenge", keys, "evt_1", at, body)
	parts := strings.Split(h["webhook-signature"], " ")
	if len(parts) != 2 {
		t.Fatalf("webhook-signature %q: want two signatures within the window", h["webhook-signature"])
	}
	if parts[0] != DeliveryHeaders("my-challenge", newKey, "evt_1", at, body)["webhook-signature"] ||
		parts[1] != DeliveryHeaders("my-challenge", oldKey, "evt_1", at, body)["webhook-signature"] {
		t.Fatalf("webhook-signature %q: want the new key's first, then the old key's", h["webhook-signature"])
	}
	for name, key := range map[string][]byte{"new": newKey, "old": oldKey} {
		if !standardVerify(key, h, body) {
			t.Errorf("the %s key does not verify within the window", name)
		}
		if !VerifyDelivery("my-challenge", key, h, body, at, time.Minute) {
			t.Errorf("VerifyDelivery refuses the %s key within the window", name)
		}
	}
	if standardVerify([]byte(strings.Repeat("x", 32)), h, body) || VerifyDelivery("my-challenge", []byte(strings.Repeat("x", 32)), h, body, at, time.Minute) {
		t.Error("an unrelated key verifies")
	}
	if h["X-SERVICE-Signature"] != ServiceSignature("my-challenge", body) {
		t.Errorf("X-SERVICE-Signature %q is not the challenge's alone", h["X-SERVICE-Signature"])
	}

	// Signed at the window's end (a retry after it): the new key only.
	after := SignDelivery("my-challenge", keys, "evt_1", until, body)
	if strings.Contains(after["webhook-signature"], " ") || !standardVerify(newKey, after, body) || standardVerify(oldKey, after, body) {
		t.Fatalf("webhook-signature %q at the window's end: want the new key's alone", after["webhook-signature"])
	}
	// No previous key: exactly what DeliveryHeaders signs.
	if got := SignDelivery("my-challenge", SigningKeys{Current: newKey}, "evt_1", at, body); got["webhook-signature"] !=
		DeliveryHeaders("my-challenge", newKey, "evt_1", at, body)["webhook-signature"] {
		t.Fatalf("one key: %q", got["webhook-signature"])
	}
}
