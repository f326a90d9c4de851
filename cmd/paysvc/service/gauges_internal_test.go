package service

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"paysvc/storage/storagetest"
)

// The database gauges are read at most every PAYSVC_DB_GAUGES_EVERY, whatever
// scrapes them; a read that fails leaves them out and is counted; a role runs
// only its own reads.
func TestDBGauges(t *testing.T) {
	t.Parallel()
	schema := storagetest.New(t)
	ctx := context.Background()
	if _, err := schema.DB.ExecContext(ctx, `INSERT INTO merchants (merchant_id, name, environment) VALUES ('MS', 'S', 'sandbox')`); err != nil {
		t.Fatal(err)
	}
	addFile := func(id string) {
		t.Helper()
		if _, err := schema.DB.ExecContext(ctx, `INSERT INTO payout_files (file_id, merchant_id, tracking_id, status, version, data, created_at, updated_at)
			VALUES ($1, 'MS', gen_random_uuid(), 'PREVIEW-AND-APPROVE', 1, '{}', now(), now())`, id); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := Config{Environment: "sandbox", Roles: []string{RoleRails}, DBGaugesEvery: time.Minute}
	reg := prometheus.NewRegistry()
	g := newDBGauges(reg, schema.DB, cfg, log)
	clock := time.Now()
	g.now = func() time.Time { return clock }
	awaiting := func() string {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "paysvc_payout_files_awaiting_approval" {
				return mf.GetMetric()[0].GetGauge().String()
			}
		}
		return "absent"
	}
	if got := awaiting(); got != "value:0" {
		t.Fatalf("no file: %s", got)
	}
	addFile("F1")
	if got := awaiting(); got != "value:0" {
		t.Errorf("a scrape within the period read the database again: %s", got)
	}
	clock = clock.Add(time.Minute)
	if got := awaiting(); got != "value:1" {
		t.Errorf("a scrape after the period: %s, want 1", got)
	}
	if n := testutil.CollectAndCount(g, "paysvc_webhooks_disabled_endpoints"); n != 0 {
		t.Errorf("a rails-only process exports the dispatcher's gauges (%d)", n)
	}

	schema.DB.Close()
	clock = clock.Add(time.Minute)
	if got := awaiting(); got != "absent" {
		t.Errorf("a failed read still exported %s", got)
	}
	if f := testutil.ToFloat64(g.failures); f != 1 {
		t.Errorf("failures: %v, want 1", f)
	}
	if newDBGauges(prometheus.NewRegistry(), schema.DB, Config{Roles: []string{RoleAPI, RoleEngine}}, log) != nil {
		t.Error("an api and engine process has database gauges")
	}
}
