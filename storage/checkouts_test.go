package storage_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"paysvc/storage"
	"paysvc/storage/storagetest"
)

func TestCheckoutLookup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storagetest.New(t).DB

	// The primary key's index must answer a lookup by id: a cast of the column
	// (checkout_id::text = $1) would scan every session of every merchant. With
	// sequential scans priced out, a query that can use the index shows it.
	t.Run("IndexScan", func(t *testing.T) {
		for name, q := range map[string]string{"CheckoutByID": storage.CheckoutByIDQuery, "GetCheckout": storage.GetCheckoutQuery} {
			tx, err := db.BeginTxx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.ExecContext(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
				t.Fatal(err)
			}
			args := []any{"00000000-0000-4000-8000-000000000000"}
			if strings.Contains(q, "$2") {
				args = []any{"M1", "00000000-0000-4000-8000-000000000000"}
			}
			var lines []string
			if err := tx.SelectContext(ctx, &lines, `EXPLAIN `+q, args...); err != nil {
				t.Fatal(err)
			}
			_ = tx.Rollback()
			plan := strings.Join(lines, "\n")
			// The sub-plan of `paid` casts the outer id to meet the invoices' text index;
			// that is fine. The scan of checkouts itself is what must be by index.
			if !strings.HasPrefix(lines[0], "Index Scan using checkouts_pkey on checkouts c") || strings.Contains(plan, "Seq Scan on checkouts") {
				t.Errorf("%s does not use the primary key's index:\n%s", name, plan)
			}
		}
	})

	// A malformed id names no session: ErrNotFound, and the database is not asked
	// (a closed pool would answer every query with an error).
	t.Run("MalformedIDNeverQueried", func(t *testing.T) {
		closed := storagetest.New(t).DB
		closed.Close()
		for _, id := range []string{"", "not-a-uuid", "00000000-0000-4000-8000-00000000000", "00000000-0000-4000-8000-000000000000x",
			"00000000-0000-4000-8000-00000000000A", "{00000000-0000-4000-8000-000000000000}", "00000000-0000-4000-8000-00000000000\x00"} {
			if _, err := storage.CheckoutByID(ctx, closed, id); !errors.Is(err, storage.ErrNotFound) {
				t.Errorf("CheckoutByID(%q): %v, want ErrNotFound without a query", id, err)
			}
			if _, err := storage.GetCheckout(ctx, closed, "M1", id); !errors.Is(err, storage.ErrNotFound) {
				t.Errorf("GetCheckout(%q): %v, want ErrNotFound without a query", id, err)
			}
		}
		// A well-formed id does reach the database (the closed pool's error).
		if _, err := storage.CheckoutByID(ctx, closed, "00000000-0000-4000-8000-000000000000"); err == nil || errors.Is(err, storage.ErrNotFound) {
			t.Errorf("a well-formed id should have been looked up: %v", err)
		}
	})
}
