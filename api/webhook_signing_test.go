package api_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// standardWebhooksVerify checks webhook-signature the way the Standard Webhooks
// specification tells a receiver to, written here from the specification and not
// from paysvc's code: drop "whsec_", base64-decode the rest into the key, HMAC-SHA256
// "<webhook-id>.<webhook-timestamp>.<raw body>", base64 it, and compare it with each
// space-separated "v1,<signature>" entry of the header.
func standardWebhooksVerify(secret string, h map[string]string, body []byte) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || !strings.HasPrefix(secret, "whsec_") {
		return false
	}
	return signatureMatches(key, h, body)
}

func signatureMatches(key []byte, h map[string]string, body []byte) bool {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(h["webhook-id"] + "." + h["webhook-timestamp"] + "."))
	mac.Write(body)
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, part := range strings.Fields(h["webhook-signature"]) {
		if v, sig, ok := strings.Cut(part, ","); ok && v == "v1" && hmac.Equal([]byte(sig), []byte(want)) {
			return true
		}
	}
	return false
}

// serviceSignatureOK checks the spec's X-SERVICE-Signature: hex HMAC-SHA256 of the
// raw body keyed by the challenge.
func serviceSignatureOK(challenge string, h map[string]string, body []byte) bool {
	mac := hmac.New(sha256.New, []byte(challenge))
	mac.Write(body)
	return hmac.Equal([]byte(h["X-SERVICE-Signature"]), []byte(hex.EncodeToString(mac.Sum(nil))))
}

// Deliveries carry the spec's {topic, data}; the challenge only for webhooks that
// opt in. X-SERVICE-Signature is keyed by the challenge, webhook-signature by a
// separate whsec_ secret shown only at creation and rotation.
func TestWebhookSigning(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) {
		c.API.WebhookAllowPrivate = true
		c.Webhooks.Poll = 20 * time.Millisecond
	})
	b := newBundle(t, env, "Signing")
	plain, echo := newReceiver(t, 200), newReceiver(t, 200)
	create := func(url, challenge string, body map[string]any) (id, secret string) {
		t.Helper()
		body["endpoint"], body["challenge"], body["wallet_transfer_event"] = url, challenge, true
		r := b.post("/api/v1/webhooks/", body)
		if r.Status != 201 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		m := r.Map(t)
		secret, _ = m["signing_secret"].(string)
		if k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_")); err != nil || len(k) < 24 || !strings.HasPrefix(secret, "whsec_") {
			t.Fatalf("signing_secret %q is not whsec_ + base64 of >= 24 bytes", secret)
		}
		if strings.Contains(string(r.Body), challenge) {
			t.Fatalf("the challenge came back: %s", r.Body)
		}
		return m["id"].(string), secret
	}
	plainID, plainSecret := create(plain.srv.URL+"/hook", "plain-challenge-1", map[string]any{})
	echoID, _ := create(echo.srv.URL+"/hook", "echo-challenge-1", map[string]any{"include_challenge": true})

	t.Run("ReadsNeverShowTheSigningSecret", func(t *testing.T) {
		for _, r := range []servicetest.Response{b.get("/api/v1/webhooks/" + plainID + "/"), b.get("/api/v1/webhooks/")} {
			if r.Status != 200 || strings.Contains(string(r.Body), "whsec_") || strings.Contains(string(r.Body), "signing_secret") ||
				strings.Contains(string(r.Body), plainSecret[6:]) || strings.Contains(string(r.Body), "challenge-1") {
				t.Fatalf("a read shows a secret: %d %s", r.Status, r.Body)
			}
		}
		if m := b.get("/api/v1/webhooks/" + echoID + "/").Map(t); m["include_challenge"] != true {
			t.Fatalf("include_challenge of the opted-in webhook: %v", m)
		}
		if m := b.get("/api/v1/webhooks/" + plainID + "/").Map(t); m["include_challenge"] != false {
			t.Fatalf("include_challenge by default: %v", m)
		}
		r := b.env.Do("PATCH", "/api/v1/webhooks/"+plainID+"/", map[string]any{"send_money_event": true}, servicetest.Bearer(b.secret)...)
		if r.Status != 200 || strings.Contains(string(r.Body), "whsec_") {
			t.Fatalf("patch: %d %s", r.Status, r.Body)
		}
	})

	w := b.wallet(t, "KES", "W")
	b.deposit(t, b.settlement, "10.00")
	if r := b.transfer(b.settlement, w, "1.00"); r.Status != 200 {
		t.Fatalf("transfer: %d %s", r.Status, r.Body)
	}
	waitUntil(t, "both deliveries", func() bool { return len(plain.requests()) > 0 && len(echo.requests()) > 0 })

	t.Run("DefaultBodyHasNoChallenge", func(t *testing.T) {
		got := plain.requests()[0]
		if !strings.HasPrefix(string(got.body), `{"topic":"wallet_transfer_event","data":{`) ||
			strings.Contains(string(got.body), "challenge") {
			t.Fatalf("body %s", got.body)
		}
		if !serviceSignatureOK("plain-challenge-1", got.headers, got.body) {
			t.Fatal("X-SERVICE-Signature does not verify with the challenge")
		}
		if !standardWebhooksVerify(plainSecret, got.headers, got.body) {
			t.Fatal("webhook-signature does not verify with the whsec_ secret")
		}
		if signatureMatches([]byte("plain-challenge-1"), got.headers, got.body) {
			t.Fatal("webhook-signature verifies with the challenge: one leaked challenge forges it")
		}
	})
	t.Run("OptedInBodyEchoesTheChallenge", func(t *testing.T) {
		got := echo.requests()[0]
		if !strings.HasSuffix(string(got.body), `,"challenge":"echo-challenge-1"}`) {
			t.Fatalf("body %s", got.body)
		}
		if !serviceSignatureOK("echo-challenge-1", got.headers, got.body) || signatureMatches([]byte("echo-challenge-1"), got.headers, got.body) {
			t.Fatal("an opted-in delivery is signed as the default one must be too")
		}
	})
	t.Run("RotationSignsLaterDeliveriesWithTheNewSecretOnly", func(t *testing.T) {
		r := b.post("/api/v1/webhooks/"+plainID+"/rotate-secret/", map[string]any{"expire_previous_in": 0})
		newSecret, _ := r.Map(t)["signing_secret"].(string)
		if r.Status != 200 || !strings.HasPrefix(newSecret, "whsec_") || newSecret == plainSecret {
			t.Fatalf("rotate: %d %s", r.Status, r.Body)
		}
		if g := b.get("/api/v1/webhooks/" + plainID + "/"); strings.Contains(string(g.Body), newSecret[6:]) {
			t.Fatalf("GET shows the rotated secret: %s", g.Body)
		}
		n := len(plain.requests())
		if r := b.transfer(b.settlement, w, "1.00"); r.Status != 200 {
			t.Fatalf("transfer: %d %s", r.Status, r.Body)
		}
		waitUntil(t, "the delivery after rotation", func() bool { return len(plain.requests()) > n })
		got := plain.requests()[n]
		if !standardWebhooksVerify(newSecret, got.headers, got.body) || standardWebhooksVerify(plainSecret, got.headers, got.body) {
			t.Fatal("the delivery after rotation is not signed with the new secret alone")
		}
		if !serviceSignatureOK("plain-challenge-1", got.headers, got.body) {
			t.Fatal("rotating the signing secret changed X-SERVICE-Signature's key")
		}
	})
}
