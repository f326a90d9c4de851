package api_test

import (
	"testing"

	"paysvc/cmd/paysvc/service/servicetest"
)

// expireKeys ages every Idempotency-Key record past PAYSVC_IDEMPOTENCY_TTL (24 h), as
// a day passing would; the engine's processed commands stay.
func expireKeys(t *testing.T, env *servicetest.Env) {
	t.Helper()
	if _, err := env.Schema.DB.Exec(`UPDATE idempotency_keys SET created_at = created_at - interval '2 days'`); err != nil {
		t.Fatal(err)
	}
}

// A key reused after its record expired, on another endpoint or with another body, is
// a new operation: never the first operation's reply with 2xx. With the same route
// and body it is still the first operation (the engine's stored reply answers).
func TestIdempotencyKeyScopedByOperation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deposit(t, b.settlement, "100.00")
	w := b.wallet(t, "KES", "ops")
	key := []string{"Idempotency-Key", "reused-key-1"}

	first := b.transfer(b.settlement, w, "10.00", key...)
	if first.Status != 200 {
		t.Fatalf("transfer: %d %s", first.Status, first.Body)
	}
	expireKeys(t, b.env)

	t.Run("AnotherEndpoint", func(t *testing.T) {
		r := b.post("/api/v1/wallets/", map[string]any{"currency": "KES", "wallet_type": "WORKING", "label": "after expiry"}, key...)
		if r.Status != 201 {
			t.Fatalf("wallet create with a key last used for a transfer: %d %s", r.Status, r.Body)
		}
		if m := r.Map(t); m["label"] != "after expiry" || m["wallet_id"] == w {
			t.Fatalf("wallet create answered with another operation's reply: %s", r.Body)
		}
		var list struct {
			Count int `json:"count"`
		}
		b.get("/api/v1/wallets/").JSON(t, &list)
		if list.Count != 3 {
			t.Fatalf("%d wallets, want 3: the create was not carried out", list.Count)
		}
	})

	t.Run("SameRouteAnotherBody", func(t *testing.T) {
		expireKeys(t, b.env)
		r := b.transfer(b.settlement, w, "20.00", key...)
		if r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("transfer of 20 with the reused key: %d %s", r.Status, r.Body)
		}
		if cur, _ := b.balance(t, w); cur != "30.00" {
			t.Fatalf("destination %s, want 30.00: the second transfer was answered with the first's reply", cur)
		}
		// The same request again, after its record expired too, is the same operation.
		expireKeys(t, b.env)
		again := b.transfer(b.settlement, w, "20.00", key...)
		if again.Status != 200 || !sameJSON(again.Map(t), r.Map(t)) {
			t.Fatalf("retry of the same transfer: %d %s, want %s", again.Status, again.Body, r.Body)
		}
		if cur, _ := b.balance(t, w); cur != "30.00" {
			t.Fatalf("destination %s, want 30.00: a retry was applied twice", cur)
		}
	})
}

// Whoever holds the public key (every visitor of the merchant's pages) cannot claim
// the Idempotency-Keys of the merchant's server: a public-key request with key K does
// not touch a secret-key request with K.
func TestIdempotencyKeyScopedByPrincipal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := map[string]any{"phone_number": "254708374149", "amount": "100", "api_ref": "order-7"}
	key := []string{"Idempotency-Key", "order-7"}
	pub := b.env.Do("POST", "/api/v1/payment/mpesa-stk-push/", body, append([]string{"X-SERVICE-PUBLIC-API-KEY", b.public}, key...)...)
	if pub.Status != 200 {
		t.Fatalf("public stk push: %d %s", pub.Status, pub.Body)
	}
	sec := b.post("/api/v1/payment/mpesa-stk-push/", body, key...)
	if sec.Status != 200 || sec.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("secret stk push with the key the public key used: %d replayed=%q %s", sec.Status, sec.Header.Get("Idempotent-Replayed"), sec.Body)
	}
	invoice := func(r servicetest.Response) string {
		var s struct {
			Invoice map[string]any `json:"invoice"`
		}
		r.JSON(t, &s)
		id, _ := s.Invoice["invoice_id"].(string)
		return id
	}
	if a, z := invoice(pub), invoice(sec); a == "" || a == z {
		t.Fatalf("the secret request got the public request's invoice %q", a)
	}
	// Another body from the public side cannot turn the secret key's retries into 422s.
	pub2 := b.env.Do("POST", "/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254708374149", "amount": "999"},
		append([]string{"X-SERVICE-PUBLIC-API-KEY", b.public}, "Idempotency-Key", "order-8")...)
	if pub2.Status != 200 {
		t.Fatalf("public stk push: %d %s", pub2.Status, pub2.Body)
	}
	if r := b.post("/api/v1/payment/mpesa-stk-push/", body, "Idempotency-Key", "order-8"); r.Status != 200 {
		t.Fatalf("secret request after a public pre-claim: %d %s", r.Status, r.Body)
	}
	// Each side still replays its own.
	if r := b.post("/api/v1/payment/mpesa-stk-push/", body, key...); r.Header.Get("Idempotent-Replayed") != "true" || invoice(r) != invoice(sec) {
		t.Fatalf("secret replay: %d %s", r.Status, r.Body)
	}
}

// A key with control characters is refused, naming the header.
func TestIdempotencyKeyMustBePrintable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.post("/api/v1/wallets/", map[string]any{"currency": "KES", "label": "x"}, "Idempotency-Key", "a\tb")
	if _, _, attr := errorBody(t, r); r.Status != 400 || attr != "Idempotency-Key" {
		t.Fatalf("key with a tab: %d %s", r.Status, r.Body)
	}
}

// A request in flight when this version was deployed has an unscoped record (key
// alone) holding its command id; its retry after the deploy takes that record over
// and reuses that id, so the engine applies it once.
func TestIdempotencyRecordFromBeforeScoping(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deposit(t, b.settlement, "100.00")
	w := b.wallet(t, "KES", "ops")
	// The first attempt ran under another key, so its command id is not the one this
	// version derives for "in-flight-at-deploy": only the record can lead back to it.
	first := b.transfer(b.settlement, w, "10.00", "Idempotency-Key", "before-deploy")
	if first.Status != 200 {
		t.Fatalf("transfer: %d %s", first.Status, first.Body)
	}
	// Make its record look like one written before scoping whose holder died before
	// storing the answer: the key alone, the applied command's id, no response.
	res, err := b.env.Schema.DB.Exec(`UPDATE idempotency_keys SET idem_key = 'in-flight-at-deploy', response_status = NULL,
		response_body = NULL, locked_until = NULL WHERE merchant_id = $1 AND idem_key LIKE '%before-deploy'`, b.merchant)
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("rewrite record: %v (%d rows)", err, n)
	}
	retry := b.transfer(b.settlement, w, "10.00", "Idempotency-Key", "in-flight-at-deploy")
	if retry.Status != 200 || !sameJSON(retry.Map(t), first.Map(t)) {
		t.Fatalf("retry across the deploy: %d %s, want %s", retry.Status, retry.Body, first.Body)
	}
	if cur, _ := b.balance(t, w); cur != "10.00" {
		t.Fatalf("destination %s, want 10.00: the retry was applied twice", cur)
	}
}
