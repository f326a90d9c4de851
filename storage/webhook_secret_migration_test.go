package storage_test

import (
	"bytes"
	"context"
	"os"
	"testing"

	"paysvc/storage/storagetest"
)

// Migration 0020 gives every existing webhook its own signing secret (>= 24 random
// bytes) and no challenge echo: it is run here over webhooks made before it.
func TestMigration0020_BackfillsSigningSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storagetest.New(t)
	sql, err := os.ReadFile("migrations/0020_webhook_signing_secret.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`ALTER TABLE webhooks DROP COLUMN include_challenge, DROP COLUMN signing_secret`, // as before 0020
		`INSERT INTO merchants (merchant_id, name, environment) VALUES ('M1', 'Old', 'sandbox')`,
		`INSERT INTO webhooks (webhook_id, merchant_id, endpoint, challenge) VALUES ('W1', 'M1', 'https://a.example', 'c1'),
			('W2', 'M1', 'https://b.example', 'c2')`,
		string(sql),
	} {
		if _, err := s.DB.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var rows []struct {
		Secret []byte `db:"signing_secret"`
		Echo   bool   `db:"include_challenge"`
	}
	if err := s.DB.SelectContext(ctx, &rows, `SELECT signing_secret, include_challenge FROM webhooks ORDER BY webhook_id`); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || len(rows[0].Secret) < 24 || len(rows[1].Secret) < 24 || bytes.Equal(rows[0].Secret, rows[1].Secret) ||
		rows[0].Echo || rows[1].Echo {
		t.Fatalf("after 0020: %+v", rows)
	}
	if _, err := s.DB.ExecContext(ctx, `UPDATE webhooks SET signing_secret = '\x00' WHERE webhook_id = 'W1'`); err == nil {
		t.Fatal("a signing secret shorter than 24 bytes was stored")
	}
}
