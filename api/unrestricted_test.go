package api_test

import (
	"context"
	"crypto/sha256"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/lib/pq"

	"paysvc/api"
	"paysvc/api/edge"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage"
)

// A secret key with an empty permission list and no unrestricted flag grants
// nothing: every route that takes a secret key answers 403, sandbox tools
// included, walked from the router's own table. Before the flag, an empty list
// meant every right, so a key whose list was lost did everything.
func TestEmptyPermissionListGrantsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key, id := edge.NewKey("secret", "sandbox")
	sum := sha256.Sum256([]byte(key))
	if err := storage.InsertAPIKey(context.Background(), b.env.Schema.DB, storage.APIKey{KeyID: id, MerchantID: b.merchant,
		Kind: "secret", Environment: "sandbox", Permissions: pq.StringArray{}}, sum[:]); err != nil {
		t.Fatal(err)
	}
	bearer := servicetest.Bearer(key)
	// First a plain read: a key that is let through would otherwise reach the
	// streaming route (events/listen) below and hold the walk open.
	if r := b.env.Do("GET", "/api/v1/wallets/", nil, bearer...); r.Status != 403 {
		t.Fatalf("GET /api/v1/wallets/ with an empty list and no flag: %d %s, want 403", r.Status, r.Body)
	}
	param := regexp.MustCompile(`:[a-z_]+`)
	checked := 0
	for _, rt := range api.New(api.Config{}, api.Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}).Routes() {
		if rt.Permission == "" && !strings.HasPrefix(rt.Access, "sandbox") {
			continue
		}
		path := param.ReplaceAllString(rt.Path, "ABCDEFGH23")
		var body any
		if rt.Method != "GET" && rt.Method != "DELETE" {
			body = map[string]any{}
		}
		r := b.env.Do(rt.Method, path, body, bearer...)
		if r.Status != 403 {
			t.Errorf("%s %s with an empty list and no flag: %d %s, want 403", rt.Method, rt.Path, r.Status, r.Body)
		}
		checked++
	}
	if checked < 30 {
		t.Fatalf("only %d routes checked", checked)
	}
	// The merchant's own key, made with the merchant, still does everything.
	if r := b.post("/api/v1/wallets/", map[string]any{"currency": "KES", "wallet_type": "WORKING", "label": "still full"}); r.Status != 201 {
		t.Fatalf("main key creating a wallet: %d %s", r.Status, r.Body)
	}
}

// Migration 0061 over keys of the old shape (no flag: an empty list was
// unrestricted): the merchant's main secret key keeps every right, sandbox tools
// included; a restricted key keeps exactly its list; the public key still opens
// checkouts and still reads no wallet.
func TestMigration0061_KeysKeepTheirRights(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	db := b.env.Schema.DB
	migration, err := os.ReadFile("../storage/migrations/0061_key_unrestricted.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	main, mainID := edge.NewKey("secret", "sandbox")
	viewer, viewerID := edge.NewKey("secret", "sandbox")
	public, publicID := edge.NewKey("public", "sandbox")
	hash := func(k string) []byte { s := sha256.Sum256([]byte(k)); return s[:] }
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{sql: `ALTER TABLE api_keys DROP CONSTRAINT api_keys_unrestricted_shape, DROP COLUMN unrestricted`}, // as before 0061
		{`INSERT INTO api_keys (key_id, merchant_id, kind, environment, key_hash, permissions) VALUES
			($1, $4, 'secret', 'sandbox', $5, '{}'), ($2, $4, 'secret', 'sandbox', $6, '{view_wallets}'),
			($3, $4, 'public', 'sandbox', $7, '{}')`, []any{mainID, viewerID, publicID, b.merchant, hash(main), hash(viewer), hash(public)}},
		{sql: string(migration)},
	} {
		if _, err := db.ExecContext(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	var flags []struct {
		ID           string `db:"key_id"`
		Unrestricted bool   `db:"unrestricted"`
	}
	if err := db.SelectContext(ctx, &flags, `SELECT key_id, unrestricted FROM api_keys WHERE key_id = ANY($1)`,
		pq.StringArray{mainID, viewerID, publicID}); err != nil {
		t.Fatal(err)
	}
	for _, f := range flags {
		if f.Unrestricted != (f.ID == mainID) {
			t.Errorf("key %s unrestricted = %v after 0061", f.ID, f.Unrestricted)
		}
	}

	as := func(key string) []string { return servicetest.Bearer(key) }
	wallet := map[string]any{"currency": "KES", "wallet_type": "WORKING", "label": "after 0061"}
	deposit := "/api/v1/sandbox/wallets/" + b.settlement + "/deposit/"
	for _, c := range []struct {
		name, method, path string
		body               any
		headers            []string
		want               int
	}{
		{"MainListsWallets", "GET", "/api/v1/wallets/", nil, as(main), 200},
		{"MainCreatesWallet", "POST", "/api/v1/wallets/", wallet, as(main), 201},
		{"MainUsesSandboxTools", "POST", deposit, map[string]any{"amount": "10"}, as(main), 200},
		{"MainReadsWebhooks", "GET", "/api/v1/webhooks/", nil, as(main), 200},
		{"ViewerListsWallets", "GET", "/api/v1/wallets/", nil, as(viewer), 200},
		{"ViewerCannotCreateWallet", "POST", "/api/v1/wallets/", map[string]any{"currency": "KES", "wallet_type": "WORKING", "label": "viewer"}, as(viewer), 403},
		{"ViewerCannotUseSandboxTools", "POST", deposit, map[string]any{"amount": "10"}, as(viewer), 403},
		{"ViewerCannotReadWebhooks", "GET", "/api/v1/webhooks/", nil, as(viewer), 403},
		{"PublicOpensCheckout", "POST", "/api/v1/checkout/", map[string]any{"amount": 10, "currency": "KES", "email": "payer@example.com"},
			[]string{"X-SERVICE-PUBLIC-API-KEY", public}, 200},
		{"PublicReadsNoWallet", "GET", "/api/v1/wallets/", nil, as(public), 401},
	} {
		if r := b.env.Do(c.method, c.path, c.body, c.headers...); r.Status != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, r.Status, r.Body, c.want)
		}
	}
	// The shape is one per meaning: a restricted-and-unrestricted row is refused.
	if _, err := db.ExecContext(ctx, `UPDATE api_keys SET unrestricted = true WHERE key_id = $1`, viewerID); err == nil {
		t.Error("a key with a list was marked unrestricted")
	}
	if _, err := db.ExecContext(ctx, `UPDATE api_keys SET unrestricted = true WHERE key_id = $1`, publicID); err == nil {
		t.Error("a public key was marked unrestricted")
	}
}
