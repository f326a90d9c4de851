package api_test

import (
	"context"
	"paysvc/api"
	"strings"
	"testing"
	"time"

	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/admin"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage"
)

func TestAuthentication(t *testing.T) {
	t.Parallel()
	// The key cache ages by the test's clock: a step past its TTL outlives every
	// cached lookup.
	clock := waittest.NewClock(time.Now())
	const ttl = time.Minute
	env := servicetest.Start(t, func(c *service.Config) { c.API.KeyCacheTTL, c.API.Now = ttl, clock.Now })
	b := newBundle(t, env, "Acme")
	liveLike := strings.Replace(b.secret, "_test_", "_live_", 1)

	authCases(t, env, []authCase{
		{"UnknownKey", []string{"Authorization", "Bearer ISSecretKey_test_0000"}, 401, "Invalid api token"},
		{"PublicKeyAsBearer", []string{"Authorization", "Bearer " + b.public}, 401, "Invalid api token"},
		{"Valid", []string{"Authorization", "Bearer " + b.secret}, 200, ""},
		// The SDK sends the public key too: an extra valid credential is never refused.
		{"ValidWithPublicHeader", []string{"Authorization", "Bearer " + b.secret, "INTASEND_PUBLIC_API_KEY", b.public}, 200, ""},
	})

	t.Run("RestrictedKeyAuthenticates", func(t *testing.T) {
		k, err := admin.CreateKey(context.Background(), env.Schema.DB, b.merchant, []string{"view_wallets"})
		if err != nil {
			t.Fatal(err)
		}
		if r := env.Do("GET", "/api/v1/wallets/", nil, servicetest.Bearer(k.Key)...); r.Status != 200 {
			t.Fatalf("restricted key: %d %s", r.Status, r.Body)
		}
	})

	t.Run("RevokedKey", func(t *testing.T) {
		k, err := admin.CreateKey(context.Background(), env.Schema.DB, b.merchant, []string{"add_files"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := storage.RevokeKey(context.Background(), env.Schema.DB, k.KeyID); err != nil {
			t.Fatal(err)
		}
		clock.Advance(ttl)
		r := env.Do("GET", "/api/v1/wallets/", nil, servicetest.Bearer(k.Key)...)
		if d, _, _ := errorBody(t, r); r.Status != 401 || d != "Invalid api token" {
			t.Fatalf("revoked key: %d %s", r.Status, r.Body)
		}
	})

	t.Run("DisabledMerchant", func(t *testing.T) {
		other := newBundle(t, env, "Disabled Ltd")
		if _, err := storage.SetMerchantEnabled(context.Background(), env.Schema.DB, other.merchant, false); err != nil {
			t.Fatal(err)
		}
		clock.Advance(ttl)
		r := other.get("/api/v1/wallets/")
		if r.Status != 403 {
			t.Fatalf("disabled merchant: %d %s", r.Status, r.Body)
		}
		errorBody(t, r)
	})

	t.Run("LogsCarryNoKeys", func(t *testing.T) {
		logs := env.Logs.String()
		if !strings.Contains(logs, `"request_id"`) || !strings.Contains(logs, b.merchant) {
			t.Fatalf("request logs should carry request and merchant ids; got %d bytes", len(logs))
		}
		for _, secret := range []string{b.secret, b.public, b.secret[len("ISSecretKey_test_"):][:16], liveLike} {
			if strings.Contains(logs, secret) {
				t.Fatalf("a key appears in the logs")
			}
		}
	})
}

// A malformed or foreign credential is refused before any key is looked up: on
// the handler alone (bareAPI).
func TestAuthentication_RefusedAtTheEdge(t *testing.T) {
	t.Parallel()
	secret := "ISSecretKey_test_" + strings.Repeat("a", 64)
	authCases(t, newBareAPI(t, api.Config{}), []authCase{
		{"NoHeader", nil, 401, "No credentials provided"},
		{"BearerAlone", []string{"Authorization", "Bearer"}, 401, "No credentials provided"},
		{"OtherScheme", []string{"Authorization", "Token " + secret}, 401, "No credentials provided"},
		{"SpacesInToken", []string{"Authorization", "Bearer " + secret + " extra"}, 401, "Bearer string should not contain spaces"},
		{"LiveKeyOnSandbox", []string{"Authorization", "Bearer " + strings.Replace(secret, "_test_", "_live_", 1)}, 401, "Invalid token for live environment"},
		{"Garbage", []string{"Authorization", "Bearer nonsense"}, 401, "Invalid api token"},
	})
	// A sandbox key on a live server.
	authCases(t, newBareAPI(t, api.Config{Environment: "live"}), []authCase{
		{"SandboxKeyOnLive", []string{"Authorization", "Bearer " + secret}, 401, "Invalid token for live environment"},
	})
}

type authCase struct {
	name    string
	headers []string
	status  int
	detail  string
}

// authCases sends GET /api/v1/wallets/ with each case's headers to server and
// checks the status and the error's detail.
func authCases(t *testing.T, server interface {
	Do(method, path string, body any, headers ...string) servicetest.Response
}, cases []authCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := server.Do("GET", "/api/v1/wallets/", nil, tc.headers...)
			if r.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.status, r.Body)
			}
			if tc.detail != "" {
				if d, _, _ := errorBody(t, r); d != tc.detail {
					t.Fatalf("detail %q, want %q", d, tc.detail)
				}
			}
		})
	}
}

func TestAuthentication_LiveServer(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) { c.Environment = "live"; c.API.Environment = "live" })
	m := env.Merchant("Live Co")
	if !strings.HasPrefix(m.SecretKey, "ISSecretKey_live_") || !strings.HasPrefix(m.PublicKey, "ISPubKey_live_") {
		t.Fatalf("live merchant keys: %s %s", m.SecretKey[:20], m.PublicKey[:17])
	}
	if r := env.Do("GET", "/api/v1/wallets/", nil, servicetest.Bearer(m.SecretKey)...); r.Status != 200 {
		t.Fatalf("live key on live: %d %s", r.Status, r.Body)
	}
	// The sandbox funding helper does not exist on a live server.
	r := env.Do("POST", "/api/v1/sandbox/wallets/ANY/deposit/", map[string]any{"amount": "1.00"}, servicetest.Bearer(m.SecretKey)...)
	if r.Status != 404 {
		t.Fatalf("sandbox deposit on live: %d %s", r.Status, r.Body)
	}
	errorBody(t, r)
}
