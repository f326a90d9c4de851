package storage_test

import (
	"context"
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
