package service_test

import (
	"context"
	"strings"
	"testing"

	"paysvc/cmd/paysvc/admin"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage/storagetest"
)

// The embedded Kafka persists under the data directory: a restarted service
// continues where it stopped. A service whose Kafka data was wiped refuses to run
// an engine (it would skip new commands below the stored offsets), unless told the
// wipe was deliberate.
func TestRestartEmbeddedKafka(t *testing.T) {
	t.Parallel()
	schema := storagetest.New(t)
	cfg := servicetest.Config(t, schema)
	cfg.KafkaBrokers = nil // the embedded broker is what this test is about
	start := func(c service.Config) *servicetest.Env { return servicetest.Run(t, schema, c) }
	m, err := admin.CreateMerchant(context.Background(), schema.DB, "Acme", "sandbox")
	if err != nil {
		t.Fatal(err)
	}
	walletsOf := func(env *servicetest.Env) (settlement string) {
		var l struct{ Results []map[string]any }
		env.Do("GET", "/api/v1/wallets/", nil, servicetest.Bearer(m.SecretKey)...).JSON(t, &l)
		for _, w := range l.Results {
			if w["wallet_type"] == "SETTLEMENT" {
				return w["wallet_id"].(string)
			}
		}
		t.Fatal("no settlement wallet")
		return ""
	}
	deposit := func(env *servicetest.Env, w string) {
		r := env.Do("POST", "/api/v1/sandbox/wallets/"+w+"/deposit/", map[string]any{"amount": "10.00"}, servicetest.Bearer(m.SecretKey)...)
		if r.Status != 200 {
			t.Fatalf("deposit: %d %s", r.Status, r.Body)
		}
	}

	first := start(cfg)
	w := walletsOf(first)
	deposit(first, w)
	deposit(first, w)
	first.Svc.Close()

	again := start(cfg) // same data dir: the log is reloaded
	deposit(again, w)
	r := again.Do("GET", "/api/v1/wallets/"+w+"/", nil, servicetest.Bearer(m.SecretKey)...)
	if got := r.Map(t)["current_balance"]; got != "30.00" {
		t.Fatalf("after restart the wallet holds %v, want 30.00", got)
	}
	again.Svc.Close()

	wiped := cfg
	wiped.DataDir = t.TempDir()
	if svc, err := service.Start(context.Background(), wiped, servicetest.Logger()); err == nil {
		svc.Close()
		t.Fatal("an engine started on a command log behind the stored offsets")
	} else if !strings.Contains(err.Error(), "PAYSVC_ACCEPT_COMMAND_LOG_RESET") {
		t.Fatalf("refusal does not say how to recover: %v", err)
	}
	wiped.AcceptCommandLogReset = true
	recovered := start(wiped)
	defer recovered.Svc.Close()
	deposit(recovered, w)
	r = recovered.Do("GET", "/api/v1/wallets/"+w+"/", nil, servicetest.Bearer(m.SecretKey)...)
	if got := r.Map(t)["current_balance"]; got != "40.00" {
		t.Fatalf("after an accepted log reset the wallet holds %v, want 40.00", got)
	}
}
