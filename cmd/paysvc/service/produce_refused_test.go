package service_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage/storagetest"
	"paysvc/topics"
	"paysvc/topics/inproc"
	"paysvc/topics/kafkatest"
)

// TestRefusedCommandProduceAnswers503AtOnce: when the broker refuses a command for
// good, the request is answered 503 "unavailable" as soon as the refusal arrives
// (the handler is woken by a failed produce; a produced command wakes it only with
// its reply), nothing is applied, and once the broker accepts again the same
// request succeeds.
func TestRefusedCommandProduceAnswers503AtOnce(t *testing.T) {
	ns := servicetest.Namespace(t, nil)
	commands := ns.Topic(topics.CommandsTopic)
	cluster, err := kfake.NewCluster(kfake.ListenFn(inproc.Listen), kfake.AllowAutoTopicCreation(), kfake.GroupMinSessionTimeout(time.Second),
		kfake.SeedTopics(4, commands))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	var refuse atomic.Bool
	cluster.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		req := kreq.(*kmsg.ProduceRequest)
		if !refuse.Load() {
			return nil, nil, false
		}
		for _, rt := range req.Topics {
			if rt.Topic != commands && rt.TopicID != cluster.TopicInfo(commands).TopicID {
				return nil, nil, false // events and replies go through
			}
		}
		return kafkatest.ProduceRefused(req, kerr.InvalidRecord.Code), nil, true // not retriable
	})

	schema := storagetest.New(t)
	cfg := servicetest.Config(t, schema)
	cfg.KafkaBrokers, cfg.KafkaNamespace = cluster.ListenAddrs(), ns
	cfg.API.ReplyTimeout = 10 * time.Second
	env := servicetest.Run(t, schema, cfg)
	t.Cleanup(env.Svc.Close)
	m := env.Merchant("M")
	auth := servicetest.Bearer(m.SecretKey)
	r := env.Do("POST", "/api/v1/wallets/", map[string]any{"currency": "KES", "wallet_type": "WORKING", "label": "W"}, auth...)
	if r.Status != 201 {
		t.Fatalf("create wallet: %d %s", r.Status, r.Body)
	}
	id := r.Map(t)["wallet_id"].(string)
	deposit := func() servicetest.Response {
		return env.Do("POST", "/api/v1/sandbox/wallets/"+id+"/deposit/", map[string]any{"amount": "100.00"}, auth...)
	}

	refuse.Store(true)
	start := time.Now()
	r = deposit()
	took := time.Since(start)
	if r.Status != 503 || !strings.Contains(string(r.Body), `"code":"unavailable"`) {
		t.Fatalf("refused produce: %d %s, want 503 unavailable", r.Status, r.Body)
	}
	// Well inside the reply timeout: the refusal itself answered the request.
	if took >= cfg.API.ReplyTimeout/2 {
		t.Fatalf("refused produce answered after %v; the reply timeout is %v", took, cfg.API.ReplyTimeout)
	}

	refuse.Store(false)
	r = env.Do("GET", "/api/v1/wallets/"+id+"/", nil, auth...)
	if r.Status != 200 || r.Map(t)["available_balance"] != "0.00" {
		t.Fatalf("after the refused deposit: %d %s, want a balance of 0.00", r.Status, r.Body)
	}
	if r = deposit(); r.Status != 200 {
		t.Fatalf("deposit once the broker accepts: %d %s", r.Status, r.Body)
	}
	r = env.Do("GET", "/api/v1/wallets/"+id+"/", nil, auth...)
	if r.Status != 200 || r.Map(t)["available_balance"] != "100.00" {
		t.Fatalf("after the accepted deposit: %d %s, want 100.00", r.Status, r.Body)
	}
}
