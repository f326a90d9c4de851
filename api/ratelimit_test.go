package api_test

import (
	"fmt"
	"net/netip"
	"strconv"
	"testing"

	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// limited starts a service whose per-address budget is two requests (refilling one
// per ~17 minutes), with the key and callback budgets large.
func limited(t *testing.T, trusted ...string) *servicetest.Env {
	t.Helper()
	return servicetest.Start(t, func(c *service.Config) {
		c.API.RateLimit, c.API.RateBurst = 1000, 2000
		c.API.AddrRateLimit, c.API.AddrRateBurst = 0.001, 2
		c.API.CallbackRateLimit, c.API.CallbackRateBurst = 1000, 2000
		c.API.DarajaCallbackToken = "callback-token-0123456789abcdef0123456789"
		for _, p := range trusted {
			c.API.TrustedProxies = append(c.API.TrustedProxies, netip.MustParsePrefix(p))
		}
	})
}

// wantThrottled checks a 429 with Retry-After and the one JSON error shape.
func wantThrottled(t *testing.T, r servicetest.Response, what string) {
	t.Helper()
	if r.Status != 429 {
		t.Fatalf("%s: %d %s, want 429", what, r.Status, r.Body)
	}
	if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Fatalf("%s: Retry-After %q", what, r.Header.Get("Retry-After"))
	}
	if _, code, _ := errorBody(t, r); code != "throttled" {
		t.Fatalf("%s: code %q", what, code)
	}
}

// From a peer that is not a trusted proxy, X-Forwarded-For is ignored: writing a new
// address in it does not buy a fresh bucket. /checkout/{id} is limited like every
// public route.
func TestRateLimitIgnoresForwardedForFromUntrustedPeer(t *testing.T) {
	t.Parallel()
	env := limited(t)
	for i := range 2 {
		if r := env.Do("GET", "/checkout/NOSUCH", nil, "X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i)); r.Status != 404 {
			t.Fatalf("request %d: %d %s", i, r.Status, r.Body)
		}
	}
	for i := 2; i < 5; i++ {
		wantThrottled(t, env.Do("GET", "/checkout/NOSUCH", nil, "X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i)),
			"spoofed X-Forwarded-For "+strconv.Itoa(i))
	}
	wantThrottled(t, env.Do("GET", "/api/v1/send-money/bank-codes/ke/", nil), "another public route, same address")
}

// Behind a trusted proxy each client address has its own bucket, taken from the
// right of X-Forwarded-For: an address the client prepends itself changes nothing.
func TestRateLimitTrustsForwardedForFromTrustedProxy(t *testing.T) {
	t.Parallel()
	env := limited(t, "127.0.0.1/32")
	for i := range 2 {
		if r := env.Do("GET", "/checkout/NOSUCH", nil, "X-Forwarded-For", "203.0.113.1"); r.Status != 404 {
			t.Fatalf("request %d: %d %s", i, r.Status, r.Body)
		}
	}
	wantThrottled(t, env.Do("GET", "/checkout/NOSUCH", nil, "X-Forwarded-For", "203.0.113.1"), "third from 203.0.113.1")
	wantThrottled(t, env.Do("GET", "/checkout/NOSUCH", nil, "X-Forwarded-For", "198.51.100.7, 203.0.113.1"),
		"a forged hop left of the proxy's")
	if r := env.Do("GET", "/checkout/NOSUCH", nil, "X-Forwarded-For", "203.0.113.2"); r.Status != 404 {
		t.Fatalf("another client behind the proxy: %d %s", r.Status, r.Body)
	}
}

// Invented keys are failed authentications, charged to the address: varying the
// Authorization header does not bypass the address limit. A secret key already
// known valid still passes (on its own bucket), so the flood does not lock out the
// merchant's server behind the same address.
func TestRateLimitInvalidKeysSpendTheAddress(t *testing.T) {
	t.Parallel()
	env := limited(t)
	b := newBundle(t, env, "Acme") // the secret key is now known valid
	for i := range 2 {
		r := env.Do("GET", "/api/v1/wallets/", nil, servicetest.Bearer(fmt.Sprintf("ISSecretKey_test_%064d", i))...)
		if r.Status != 401 {
			t.Fatalf("invented key %d: %d %s", i, r.Status, r.Body)
		}
	}
	for i := 2; i < 5; i++ {
		wantThrottled(t, env.Do("GET", "/api/v1/wallets/", nil, servicetest.Bearer(fmt.Sprintf("ISSecretKey_test_%064d", i))...),
			"invented key "+strconv.Itoa(i))
	}
	wantThrottled(t, env.Do("GET", "/api/v1/wallets/", nil, "Authorization", "Bearer nonsense"), "garbage key")
	if r := b.get("/api/v1/wallets/"); r.Status != 200 {
		t.Fatalf("the merchant's valid key behind the same address: %d %s", r.Status, r.Body)
	}
}

// A public key is limited per address as well as per key: one abuser exhausts their
// own address, not the merchant's checkout for everyone else.
func TestRateLimitPublicKeyPerAddress(t *testing.T) {
	t.Parallel()
	env := limited(t, "127.0.0.1/32")
	b := newBundle(t, env, "Shop")
	stk := func(from string) servicetest.Response {
		return env.Do("POST", "/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254708374149", "amount": "100"},
			"X-SERVICE-PUBLIC-API-KEY", b.public, "X-Forwarded-For", from)
	}
	for i := range 2 {
		if r := stk("203.0.113.66"); r.Status != 200 {
			t.Fatalf("public stk push %d: %d %s", i, r.Status, r.Body)
		}
	}
	wantThrottled(t, stk("203.0.113.66"), "the abuser's third")
	if r := stk("203.0.113.67"); r.Status != 200 {
		t.Fatalf("another customer with the same public key: %d %s", r.Status, r.Body)
	}
}

// Provider callbacks with the right token have their own budget: an address that
// exhausted its own (even with wrong-token callbacks) does not starve them.
func TestRateLimitCallbacksHaveTheirOwnBudget(t *testing.T) {
	t.Parallel()
	env := limited(t)
	for i := range 2 {
		if r := env.Do("POST", "/api/v1/send-money/mpesa/result/wrong-token", "{}"); r.Status != 404 {
			t.Fatalf("wrong token %d: %d %s", i, r.Status, r.Body)
		}
	}
	wantThrottled(t, env.Do("POST", "/api/v1/send-money/mpesa/result/wrong-token", "{}"), "wrong token, third")
	wantThrottled(t, env.Do("GET", "/checkout/NOSUCH", nil), "the address's public budget")
	for i := range 5 {
		r := env.Do("POST", "/api/v1/send-money/mpesa/result/"+env.Config.API.DarajaCallbackToken, "{}")
		if r.Status == 429 || r.Status == 404 {
			t.Fatalf("callback %d with the right token: %d %s", i, r.Status, r.Body)
		}
	}
}
