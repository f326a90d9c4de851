package main

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"paysvc/actors/values/ids"
	"paysvc/storage"
	"paysvc/storage/storagetest"
)

// emptySchema is a schema with nothing in it, and a URL whose connections use it.
func emptySchema(t *testing.T) string {
	t.Helper()
	base := storagetest.URL(t)
	ctx := context.Background()
	admin, err := storage.Open(ctx, base, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	name := "t_" + strings.ToLower(ids.Alias(12))
	if _, err := admin.ExecContext(ctx, `CREATE SCHEMA `+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.ExecContext(context.Background(), `DROP SCHEMA `+name+` CASCADE`)
		admin.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}

// An admin command pointed at a database migrates it only when asked, and
// refuses a schema it was not written for, saying what to run.
func TestAdminCommandsMigrateOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	dbURL := emptySchema(t)
	ctx := context.Background()
	db, err := storage.Open(ctx, dbURL, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tables := func() int {
		var n int
		if err := db.GetContext(ctx, &n, `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()`); err != nil {
			t.Fatal(err)
		}
		return n
	}

	r := runCLI(t, envWith(dbURL), "merchant", "create", "--name", "Acme")
	if r.err == nil || !strings.Contains(r.err.Error(), "no paysvc schema") || !strings.Contains(r.err.Error(), "--migrate") {
		t.Fatalf("merchant create on an empty database: want a refusal naming --migrate: %v", r)
	}
	if n := tables(); n != 0 {
		t.Fatalf("the refused command created %d tables", n)
	}

	r = runCLI(t, envWith(dbURL), "merchant", "create", "--migrate", "--name", "Acme")
	if r.err != nil {
		t.Fatalf("merchant create --migrate: %v", r)
	}
	decodeOne(t, r.stdout, "merchant_id", "public_key", "secret_key")
	st, err := storage.ReadSchemaState(ctx, db)
	if err != nil || !st.Current() {
		t.Fatalf("after --migrate: %+v, %v; want the binary's schema", st, err)
	}

	// One migration short: a binary newer than the schema refuses.
	if _, err := db.ExecContext(ctx, `DELETE FROM schema_migrations WHERE version = $1`, st.Embedded); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, envWith(dbURL), "key", "revoke", "ISSecretKey_test_0123456789abcdef")
	if r.err == nil || !strings.Contains(r.err.Error(), "older than this binary") || !strings.Contains(r.err.Error(), "paysvc migrate") {
		t.Errorf("one migration pending: want a refusal saying older and what to run: %v", r)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, 'back'), ($2, 'from the future')`,
		st.Embedded, st.Embedded+1); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, envWith(dbURL), "quarantine", "list")
	if r.err == nil || !strings.Contains(r.err.Error(), "newer than this binary") {
		t.Errorf("schema ahead: want a refusal saying newer: %v", r)
	}
}
