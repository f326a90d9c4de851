// Package storagetest gives each test its own schema in a real Postgres server,
// migrated from the embedded migrations, and drops it afterwards. The server comes
// from PAYSVC_TEST_DATABASE_URL, which `make test` sets to the private cluster it
// starts; a test that needs a database fails (never skips) without it, so CI cannot
// go green by testing nothing.
package storagetest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"paysvc/actors/values/ids"
	"paysvc/storage"
)

// URL returns the server URL or fails the test.
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("PAYSVC_TEST_DATABASE_URL")
	if u == "" {
		t.Fatal("PAYSVC_TEST_DATABASE_URL is not set: run the tests with `make test`, which starts a local PostgreSQL")
	}
	return u
}

// Schema is a migrated schema private to one test.
type Schema struct {
	DB   *sqlx.DB
	URL  string // a URL whose connections use the schema (for other processes)
	Name string
}

// New creates, migrates and registers the cleanup of a fresh schema.
func New(t testing.TB) Schema {
	t.Helper()
	base := URL(t)
	name := "t_" + strings.ToLower(ids.Alias(12))
	ctx := context.Background()
	admin, err := storage.Open(ctx, base, 10*time.Second)
	if err != nil {
		t.Fatalf("storagetest: %v", err)
	}
	if _, err := admin.ExecContext(ctx, `CREATE SCHEMA `+name); err != nil {
		admin.Close()
		t.Fatalf("storagetest: create schema: %v", err)
	}
	var db *sqlx.DB
	t.Cleanup(func() {
		if db != nil {
			db.Close()
		}
		if os.Getenv("PAYSVC_TEST_KEEP_SCHEMA") == "" {
			_, _ = admin.ExecContext(context.Background(), fmt.Sprintf(`DROP SCHEMA %s CASCADE`, name))
		}
		admin.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("storagetest: %v", err)
	}
	q := u.Query()
	q.Set("search_path", name)
	q.Set("application_name", name) // lets a fault test find (and kill) this schema's connections
	u.RawQuery = q.Encode()
	if db, err = storage.Open(ctx, u.String(), 10*time.Second); err != nil {
		t.Fatalf("storagetest: %v", err)
	}
	if _, err := storage.Migrate(ctx, db); err != nil {
		t.Fatalf("storagetest: migrate: %v", err)
	}
	return Schema{DB: db, URL: u.String(), Name: name}
}
