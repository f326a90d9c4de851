package service_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/topics"
)

// An engine that stays down longer than the command log's retention would resume
// past commands Kafka deleted before any engine applied them. It refuses to
// start, naming the partitions and offsets lost, and changes nothing; told the
// loss is accepted, it goes on from the log's start. Retention is played by
// DeleteRecords, which moves a partition's start exactly as retention does.
func TestEngineRefusesCommandsDeletedByRetention(t *testing.T) {
	t.Parallel()
	api := startAPIOnly(t)
	m := api.Merchant("Retained")
	var settlement string
	{
		eng := startEngine(t, api, "retention-1")
		var l struct{ Results []map[string]any }
		api.Do("GET", "/api/v1/wallets/", nil, servicetest.Bearer(m.SecretKey)...).JSON(t, &l)
		for _, w := range l.Results {
			if w["wallet_type"] == "SETTLEMENT" {
				settlement = w["wallet_id"].(string)
			}
		}
		deposit := api.Do("POST", "/api/v1/sandbox/wallets/"+settlement+"/deposit/", map[string]any{"amount": "10.00"},
			append(servicetest.Bearer(m.SecretKey), "Idempotency-Key", "kept")...)
		if deposit.Status != 200 {
			t.Fatalf("deposit: %d %s", deposit.Status, deposit.Body)
		}
		eng.Close()
	}
	// With no engine, a deposit is logged and never answered (504 after the reply
	// timeout): its outcome is unknown to the client, and it waits in the log.
	if r := api.Do("POST", "/api/v1/sandbox/wallets/"+settlement+"/deposit/", map[string]any{"amount": "5.00"},
		append(servicetest.Bearer(m.SecretKey), "Idempotency-Key", "deleted")...); r.Status < 500 {
		t.Fatalf("deposit without an engine: %d %s", r.Status, r.Body)
	}

	adm := api.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, api.Topic(topics.CommandsTopic))
	if err != nil {
		t.Fatal(err)
	}
	var to kadm.Offsets
	ends.Each(func(o kadm.ListedOffset) { to.AddOffset(o.Topic, o.Partition, o.Offset, -1) })
	if res, err := adm.DeleteRecords(ctx, to); err != nil || res.Error() != nil {
		t.Fatalf("delete records: %v %v", err, res.Error())
	}

	cfg := api.Config
	cfg.Roles = []string{service.RoleEngine}
	cfg.KafkaBrokers = api.Svc.Brokers
	cfg.InstanceID = "retention-2"
	if svc, err := service.Start(context.Background(), cfg, servicetest.Logger()); err == nil {
		svc.Close()
		t.Fatal("an engine started past commands deleted before they were applied")
	} else {
		for _, want := range []string{"deleted by retention", "partition", "1 commands", "PAYSVC_ACCEPT_COMMAND_LOG_RESET"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("refusal %q does not say %q", err, want)
			}
		}
	}

	cfg.AcceptCommandLogReset = true
	eng, err := service.Start(context.Background(), cfg, servicetest.Logger())
	if err != nil {
		t.Fatalf("accepted reset: %v", err)
	}
	defer eng.Close()
	after := api.Do("POST", "/api/v1/sandbox/wallets/"+settlement+"/deposit/", map[string]any{"amount": "1.00"},
		append(servicetest.Bearer(m.SecretKey), "Idempotency-Key", "after")...)
	if after.Status != 200 {
		t.Fatalf("deposit after the accepted reset: %d %s", after.Status, after.Body)
	}
	// The deleted deposit was never applied; the ones around it were, once.
	if got := api.Do("GET", "/api/v1/wallets/"+settlement+"/", nil, servicetest.Bearer(m.SecretKey)...).Map(t)["current_balance"]; got != "11.00" {
		t.Fatalf("balance %v, want 11.00 (10.00 before the gap, 1.00 after)", got)
	}
}
