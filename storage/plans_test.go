package storage_test

import (
	"context"
	"strings"
	"testing"

	"paysvc/actors/values/money"
	"paysvc/storage"
	"paysvc/storage/storagetest"
)

// Each change of a plan is a new version whose terms are kept, so billing can
// record which terms a cycle charged; a write that changes nothing is no version.
func TestPlanVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storagetest.New(t).DB
	mustExec(t, db, `INSERT INTO merchants (merchant_id, name, environment, enabled) VALUES ('M1', 'Acme', 'sandbox', true),
		('M2', 'Other', 'sandbox', true)`)
	p := storage.Plan{PlanID: "P1", MerchantID: "M1", Name: "Gold", Amount: money.MustParse("1500.00"), Currency: "KES",
		Frequency: 1, FrequencyUnit: "M", BillingCycles: 11}
	first, created, err := storage.UpsertPlan(ctx, db, p, nil)
	if err != nil || !created || first.Version != 1 {
		t.Fatalf("create: %+v %v %v", first, created, err)
	}
	same, created, err := storage.UpsertPlan(ctx, db, storage.Plan{PlanID: "P2", MerchantID: "M1", Name: "Gold",
		Amount: money.MustParse("1500"), Currency: "KES", Frequency: 1, FrequencyUnit: "W", BillingCycles: 3}, nil)
	if err != nil || created || same.PlanID != "P1" || same.Version != 1 || !same.UpdatedAt.Equal(first.UpdatedAt) ||
		same.FrequencyUnit != "M" || same.BillingCycles != 11 {
		t.Fatalf("identical terms, optional columns not given: %+v %v %v", same, created, err)
	}
	p.Amount, p.Currency = money.MustParse("20.00"), "USD"
	second, _, err := storage.UpsertPlan(ctx, db, p, []string{"billing_cycles"})
	if err != nil || second.PlanID != "P1" || second.Version != 2 || second.Amount.String() != "20.00" {
		t.Fatalf("change: %+v %v", second, err)
	}
	vs, err := storage.PlanVersions(ctx, db, "M1", "P1")
	if err != nil || len(vs) != 2 || vs[0].Amount.String() != "1500.00" || vs[0].Currency != "KES" ||
		vs[1].Amount.String() != "20.00" || vs[1].Currency != "USD" || vs[1].Version != 2 || !vs[1].ValidFrom.Equal(second.UpdatedAt) {
		t.Fatalf("versions: %+v %v", vs, err)
	}
	if vs, err := storage.PlanVersions(ctx, db, "M2", "P1"); err != nil || len(vs) != 0 {
		t.Fatalf("another merchant reads the versions: %+v %v", vs, err)
	}
	if _, _, err := storage.UpsertPlan(ctx, db, p, []string{"amount"}); err == nil {
		t.Fatal("a required column listed as optional was accepted")
	}
}

// A customer's payments are found through the index on the lower-cased email (and
// their subscription cycles through theirs by customer), not by scanning every invoice.
func TestCustomerInvoicesUseTheIndex(t *testing.T) {
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
	if err := tx.SelectContext(ctx, &lines, `EXPLAIN `+storage.CustomerInvoicesQuery, "M1", "a@example.com", 50, 0, "C1"); err != nil {
		t.Fatal(err)
	}
	if plan := strings.Join(lines, "\n"); !strings.Contains(plan, "invoices_email_lower") || !strings.Contains(plan, "subscription_invoices_customer") {
		t.Fatalf("plan does not use invoices_email_lower and subscription_invoices_customer:\n%s", plan)
	}
}
