package api

import (
	"context"
	"crypto/sha256"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/lib/pq"

	"paysvc/api/edge"
	"paysvc/storage"
	"paysvc/storage/storagetest"
)

// The public-key flows (checkout, STK push, status) arrive with the collection
// endpoints; the middleware they will use is tested here on its own: every header
// spelling of docs/compat.md and the body's public_key, the secret key alone, and the
// refusals.
func TestAuthPublicOrSecret(t *testing.T) {
	t.Parallel()
	schema := storagetest.New(t)
	ctx := context.Background()
	if err := storage.InsertMerchant(ctx, schema.DB, storage.Merchant{MerchantID: "MERPUB", Name: "P", Environment: "sandbox", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	pub := "ISPubKey_test_" + strings.Repeat("b", 64)
	sec := "ISSecretKey_test_" + strings.Repeat("c", 64)
	for kind, key := range map[string]string{"public": pub, "secret": sec} {
		h := sha256.Sum256([]byte(key))
		if err := storage.InsertAPIKey(ctx, schema.DB, storage.APIKey{KeyID: key[:30], MerchantID: "MERPUB", Kind: kind,
			Environment: "sandbox", Permissions: pq.StringArray{}}, h[:]); err != nil {
			t.Fatal(err)
		}
	}
	s := New(Config{}, Deps{DB: schema.DB, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	handler := s.authPublicOrSecret(func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"merchant": edge.PrincipalOf(c).MerchantID, "kind": edge.PrincipalOf(c).Kind})
	})
	call := func(body string, headers ...string) (int, string) {
		req := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(body))
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		rec := httptest.NewRecorder()
		c := s.echo.NewContext(req, rec)
		if err := handler(c); err != nil {
			s.handleError(err, c)
		}
		return rec.Code, rec.Body.String()
	}
	for _, tc := range []struct {
		name    string
		body    string
		headers []string
		status  int
		want    string
	}{
		{"HeaderService", "", []string{"X-SERVICE-PUBLIC-API-KEY", pub}, 200, `"kind":"public"`},
		{"HeaderSDK", "", []string{"INTASEND_PUBLIC_API_KEY", pub}, 200, `"kind":"public"`},
		{"HeaderMixedCase", "", []string{"X-IntaSend-Public-API-Key", pub}, 200, `"kind":"public"`},
		{"Body", `{"public_key":"` + pub + `","amount":10}`, nil, 200, `"merchant":"MERPUB"`},
		{"SecretAlone", "", []string{"Authorization", "Bearer " + sec}, 200, `"kind":"secret"`},
		{"SecretAndPublic", "", []string{"Authorization", "Bearer " + sec, "INTASEND_PUBLIC_API_KEY", pub}, 200, `"kind":"secret"`},
		{"Nothing", "{}", nil, 401, "No credentials provided"},
		{"UnknownPublic", "", []string{"X-SERVICE-PUBLIC-API-KEY", "ISPubKey_test_nope"}, 401, "Invalid api token"},
		{"LivePublicOnSandbox", "", []string{"X-SERVICE-PUBLIC-API-KEY", "ISPubKey_live_nope"}, 401, "Invalid token for live environment"},
		{"SecretInPublicHeader", "", []string{"X-SERVICE-PUBLIC-API-KEY", sec}, 401, "Invalid api token"},
		{"BadBearerIsNotIgnored", "", []string{"Authorization", "Bearer a b", "INTASEND_PUBLIC_API_KEY", pub}, 401, "Bearer string should not contain spaces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := call(tc.body, tc.headers...)
			if status != tc.status || !strings.Contains(body, tc.want) {
				t.Fatalf("%d %s; want %d containing %q", status, body, tc.status, tc.want)
			}
		})
	}
}
