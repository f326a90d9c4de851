package api_test

import (
	"html"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"paysvc/actors/outbound/webhooks"
	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// rotationWait bounds every wait for a delivery in these tests.
const rotationWait = 30 * time.Second

// A rotated signing secret keeps signing for the window rotate-secret asks for:
// deliveries signed inside it verify with the old key and with the new one; with no
// window, or once it ends, with the new key alone. The challenge has no window.
func TestWebhookRotationWindow(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) {
		c.API.WebhookAllowPrivate = true
		c.Webhooks.Poll = 20 * time.Millisecond
		// A retry comes at least 1.5 s after the failed attempt: after a 1 s window.
		c.Webhooks.RetryBase = 3 * time.Second
	})
	b := newBundle(t, env, "Rotation")
	recv := newReceiver(t, 200)
	r := b.post("/api/v1/webhooks/", map[string]any{"endpoint": recv.srv.URL + "/hook", "challenge": "rotation-challenge",
		"wallet_transfer_event": true})
	if r.Status != 201 || r.Map(t)["previous_secret_expires_at"] != nil {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	id, key := r.Map(t)["id"].(string), signingKey(t, r)
	w := b.wallet(t, "KES", "W")
	b.deposit(t, b.settlement, "10.00")

	// deliver makes one event and returns its delivery to recv.
	deliver := func(t *testing.T) recorded {
		t.Helper()
		n := len(recv.requests())
		if r := b.transfer(b.settlement, w, "0.10"); r.Status != 200 {
			t.Fatalf("transfer: %d %s", r.Status, r.Body)
		}
		waittest.Eventually(t, rotationWait, func() (bool, string) {
			return len(recv.requests()) > n, "the delivery of the transfer"
		})
		return recv.requests()[n]
	}
	// rotate rotates id's secret with the body given and returns the new key and the
	// window's end the answer shows (zero when null).
	rotate := func(t *testing.T, id string, body map[string]any, old []byte) ([]byte, time.Time) {
		t.Helper()
		r := b.post("/api/v1/webhooks/"+id+"/rotate-secret/", body)
		if r.Status != 200 {
			t.Fatalf("rotate %v: %d %s", body, r.Status, r.Body)
		}
		if strings.Contains(string(r.Body), webhooks.FormatSecret(old)[len(webhooks.SecretPrefix):]) {
			t.Fatalf("the rotation's answer shows the previous secret: %s", r.Body)
		}
		newKey := signingKey(t, r)
		shown, _ := r.Map(t)["previous_secret_expires_at"].(string)
		if shown == "" {
			return newKey, time.Time{}
		}
		until, err := time.Parse(time.RFC3339Nano, shown)
		if err != nil {
			t.Fatalf("previous_secret_expires_at %q: %v", shown, err)
		}
		return newKey, until
	}
	// signatures counts the v1 signatures of a delivery.
	signatures := func(got recorded) int { return len(strings.Fields(got.headers["webhook-signature"])) }

	t.Run("WindowOutOfRangeIs400", func(t *testing.T) {
		for _, v := range []any{-1, 604801, 1.5, "soon", true} {
			r := b.post("/api/v1/webhooks/"+id+"/rotate-secret/", map[string]any{"expire_previous_in": v})
			if r.Status != 400 {
				t.Fatalf("expire_previous_in %v: %d %s", v, r.Status, r.Body)
			}
			if _, _, attr := errorBody(t, r); attr != "expire_previous_in" {
				t.Fatalf("expire_previous_in %v: the error names %q: %s", v, attr, r.Body)
			}
		}
		got := deliver(t)
		if signatures(got) != 1 || !signatureMatches(key, got.headers, got.body) {
			t.Fatalf("a refused rotation changed the signing: %v", got.headers)
		}
	})

	t.Run("InsideTheWindowBothKeysVerify", func(t *testing.T) {
		before := time.Now()
		newKey, until := rotate(t, id, map[string]any{"expire_previous_in": 3600}, key)
		if until.Before(before.Add(time.Hour-time.Second)) || until.After(time.Now().Add(time.Hour+time.Second)) {
			t.Fatalf("previous_secret_expires_at %v: want an hour from the rotation", until)
		}
		if g := b.get("/api/v1/webhooks/" + id + "/").Map(t); g["previous_secret_expires_at"] == nil {
			t.Fatalf("GET shows no window: %v", g)
		}
		got := deliver(t)
		parts := strings.Fields(got.headers["webhook-signature"])
		if len(parts) != 2 || !signatureMatches(newKey, map[string]string{"webhook-id": got.headers["webhook-id"],
			"webhook-timestamp": got.headers["webhook-timestamp"], "webhook-signature": parts[0]}, got.body) {
			t.Fatalf("webhook-signature %q: want the new key's signature first, then the old key's", got.headers["webhook-signature"])
		}
		for name, k := range map[string][]byte{"old": key, "new": newKey} {
			if !signatureMatches(k, got.headers, got.body) ||
				!webhooks.VerifyDelivery("rotation-challenge", k, got.headers, got.body, time.Now(), 5*time.Minute) {
				t.Fatalf("the delivery inside the window does not verify with the %s key", name)
			}
		}
		if !serviceSignatureOK("rotation-challenge", got.headers, got.body) {
			t.Fatal("X-SERVICE-Signature is not the challenge's")
		}

		// A second rotation inside the window: the key the first one made is now the
		// previous one, and the first key signs nothing any more.
		third, until2 := rotate(t, id, map[string]any{}, newKey)
		if until2.Before(before.Add(24*time.Hour-time.Second)) || until2.After(time.Now().Add(24*time.Hour+time.Second)) {
			t.Fatalf("previous_secret_expires_at %v: want the default day", until2)
		}
		got = deliver(t)
		if signatures(got) != 2 || !signatureMatches(third, got.headers, got.body) || !signatureMatches(newKey, got.headers, got.body) ||
			signatureMatches(key, got.headers, got.body) {
			t.Fatalf("after a second rotation: want the newest and the one it retired only: %v", got.headers)
		}
		key = third
	})

	t.Run("ConsoleShowsAndSetsTheWindow", func(t *testing.T) {
		cc := newConsoleClient(t, env.BaseURL)
		session := cc.signIn(b.secret, sandboxCookie, nil)
		page := cc.page(sandboxCookie, session, "/console/webhooks")
		if page.Status != 200 || !strings.Contains(page.Body, "Previous secret valid until ") ||
			!strings.Contains(page.Body, `name="expire_previous_in"`) {
			t.Fatalf("the webhooks page shows no window or no choice of it: %d\n%s", page.Status, page.Body)
		}
		form := url.Values{"csrf": {csrfOf(t, page.Body)}, "expire_previous_in": {"604801"}}
		if r := cc.do("POST", "/console/webhooks/"+id+"/rotate-secret", form, map[string]string{sandboxCookie: session}); r.Status != 400 ||
			!strings.Contains(r.Body, "between 0 and 604800") {
			t.Fatalf("a window over 7 days through the console: %d\n%s", r.Status, r.Body)
		}
		form.Set("expire_previous_in", "3600")
		r := cc.do("POST", "/console/webhooks/"+id+"/rotate-secret", form, map[string]string{sandboxCookie: session})
		m := regexp.MustCompile(`<code id="signing-secret">(whsec_[^<]+)</code>`).FindStringSubmatch(r.Body)
		if r.Status != 200 || m == nil || !strings.Contains(r.Body, "The previous secret stays valid until ") {
			t.Fatalf("the console's rotation: %d\n%s", r.Status, r.Body)
		}
		newKey, err := webhooks.ParseSecret(html.UnescapeString(m[1]))
		if err != nil {
			t.Fatal(err)
		}
		got := deliver(t)
		if signatures(got) != 2 || !signatureMatches(newKey, got.headers, got.body) || !signatureMatches(key, got.headers, got.body) {
			t.Fatalf("after the console's rotation with an hour's window: %v", got.headers)
		}
		key = newKey
	})

	t.Run("NoWindowSignsWithTheNewKeyAlone", func(t *testing.T) {
		newKey, until := rotate(t, id, map[string]any{"expire_previous_in": 0, "challenge": "rotation-challenge-2"}, key)
		if !until.IsZero() {
			t.Fatalf("previous_secret_expires_at %v with expire_previous_in 0", until)
		}
		if g := b.get("/api/v1/webhooks/" + id + "/").Map(t); g["previous_secret_expires_at"] != nil {
			t.Fatalf("GET shows a window: %v", g)
		}
		got := deliver(t)
		if signatures(got) != 1 || !signatureMatches(newKey, got.headers, got.body) || signatureMatches(key, got.headers, got.body) {
			t.Fatalf("after a rotation without a window: %v", got.headers)
		}
		// The challenge has no window: X-SERVICE-Signature is the new one's alone.
		if !serviceSignatureOK("rotation-challenge-2", got.headers, got.body) || serviceSignatureOK("rotation-challenge", got.headers, got.body) {
			t.Fatalf("X-SERVICE-Signature after the challenge changed: %v", got.headers)
		}
		key = newKey
	})

	t.Run("ARetryAfterTheWindowCarriesTheNewKeyAlone", func(t *testing.T) {
		// A second endpoint that refuses its first request: the retry is signed after
		// the 1 s window, so it carries only the new key's signature.
		flaky := newReceiver(t, 200, 500)
		r := b.post("/api/v1/webhooks/", map[string]any{"endpoint": flaky.srv.URL + "/hook", "challenge": "flaky-challenge",
			"wallet_transfer_event": true})
		if r.Status != 201 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		flakyID, old := r.Map(t)["id"].(string), signingKey(t, r)
		newKey, until := rotate(t, flakyID, map[string]any{"expire_previous_in": 1}, old)
		if until.IsZero() {
			t.Fatal("no window shown for expire_previous_in 1")
		}
		if r := b.transfer(b.settlement, w, "0.10"); r.Status != 200 {
			t.Fatalf("transfer: %d %s", r.Status, r.Body)
		}
		waittest.Eventually(t, rotationWait, func() (bool, string) {
			return len(flaky.requests()) >= 2, "the retry after the refused attempt"
		})
		got := flaky.requests()
		if got[1].headers["webhook-id"] != got[0].headers["webhook-id"] {
			t.Fatalf("the second request is not the retry: %v %v", got[0].headers, got[1].headers)
		}
		retry := got[1]
		if signatures(retry) != 1 || !signatureMatches(newKey, retry.headers, retry.body) || signatureMatches(old, retry.headers, retry.body) {
			t.Fatalf("the retry after the window (until %v): %v", until, retry.headers)
		}
		if g := b.get("/api/v1/webhooks/" + flakyID + "/").Map(t); g["previous_secret_expires_at"] != nil {
			t.Fatalf("GET shows a window that has ended: %v", g)
		}
	})
}
