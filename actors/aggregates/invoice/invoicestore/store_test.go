package invoicestore_test

import (
	"context"
	"strings"
	"testing"

	"paysvc/actors/aggregates/invoice/invoicestore"
	"paysvc/storage/storagetest"
)

// A customer's payments are found through the index on the lower-cased email (and
// their subscription cycles through theirs by customer), not by scanning every invoice.
func TestByCustomerUsesTheIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storagetest.New(t).DB
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	if _, err := tx.ExecContext(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	var lines []string
	if err := tx.SelectContext(ctx, &lines, `EXPLAIN `+invoicestore.ByCustomerQuery, "M1", "a@example.com", 50, 0, "C1"); err != nil {
		t.Fatal(err)
	}
	if plan := strings.Join(lines, "\n"); !strings.Contains(plan, "invoices_email_lower") || !strings.Contains(plan, "subscription_invoices_customer") {
		t.Fatalf("plan does not use invoices_email_lower and subscription_invoices_customer:\n%s", plan)
	}
}
