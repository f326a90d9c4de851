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
