package topics_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/topics"
)

func TestDurabilityFor(t *testing.T) {
	for _, c := range []struct {
		brokers   int
		rf        int16
		minInSync int
	}{{0, 1, 1}, {1, 1, 1}, {2, 2, 1}, {3, 3, 2}, {5, 3, 2}} {
		d := topics.DurabilityFor(c.brokers)
		if d.Replication != c.rf || d.MinInSync != c.minInSync {
			t.Errorf("DurabilityFor(%d) = %+v, want RF %d and min.insync %d", c.brokers, d, c.rf, c.minInSync)
		}
	}
}

// Provision creates every topic with the cluster's durability and its retention,
// sets the weaker configs of a topic that already exists, and reports what only
// an operator can change (replication, command partitions) without changing it.
func TestProvisionSetsAndReports(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// A command topic made by hand, as on a cluster set up before paysvc asked for
	// more: one replica, two partitions, an hour's retention, one in-sync replica.
	hour := strconv.Itoa(int(time.Hour.Milliseconds()))
	one := "1"
	if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": &hour, "min.insync.replicas": &one}, topics.CommandsTopic); err != nil {
		t.Fatal(err)
	}
	// An event topic whose operator chose a longer retention: kept.
	year := strconv.Itoa(int((365 * 24 * time.Hour).Milliseconds()))
	if _, err := adm.CreateTopic(ctx, 4, 3, map[string]*string{"retention.ms": &year}, topics.EventTopics[topics.WalletTransferEvent]); err != nil {
		t.Fatal(err)
	}

	s := topics.Settings{CommandPartitions: 4, CommandRetention: 48 * time.Hour, EventRetention: 72 * time.Hour}
	findings, err := topics.Provision(ctx, cl, s)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]topics.Finding{}
	for _, f := range findings {
		got[f.Topic+" "+f.Setting] = f
		switch f.Topic {
		case topics.CommandsTopic:
		case topics.EventTopics[topics.WalletTransferEvent]:
			// Made by hand with the broker's min.insync.replicas; its longer
			// retention is not weaker, so that is its one finding.
			if f.Setting != "min.insync.replicas" || !f.Fixed {
				t.Errorf("event topic finding %s, want min.insync.replicas only, set", f)
			}
		default:
			t.Errorf("finding on a topic paysvc created itself: %s", f)
		}
	}
	for key, fixed := range map[string]bool{
		topics.CommandsTopic + " replication factor":  false,
		topics.CommandsTopic + " partitions":          false,
		topics.CommandsTopic + " retention.ms":        true,
		topics.CommandsTopic + " min.insync.replicas": true,
	} {
		f, ok := got[key]
		if !ok {
			t.Errorf("no finding %q in %v", key, findings)
			continue
		}
		if f.Fixed != fixed {
			t.Errorf("%s: fixed %v, want %v", f, f.Fixed, fixed)
		}
	}
	if f := got[topics.CommandsTopic+" replication factor"]; f.Have != "1" || f.Want != "3" {
		t.Errorf("replication finding %s, want 1 against 3", f)
	}

	// What the broker now holds.
	configs, err := adm.DescribeTopicConfigs(ctx, topics.CommandsTopic, topics.RepliesTopic, topics.EventTopics[topics.WalletTransferEvent],
		topics.EventTopics[topics.CollectionEvent], topics.RailsPayoutTopic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		topics.CommandsTopic: {"retention.ms": ms(48 * time.Hour), "min.insync.replicas": "2",
			"max.message.bytes": strconv.Itoa(topics.MaxRecordBytes), "cleanup.policy": "delete"},
		topics.RepliesTopic:                            {"retention.ms": ms(topics.RepliesRetention), "min.insync.replicas": "2"},
		topics.EventTopics[topics.WalletTransferEvent]: {"retention.ms": year, "min.insync.replicas": "2"},
		topics.EventTopics[topics.CollectionEvent]:     {"retention.ms": ms(72 * time.Hour), "min.insync.replicas": "2"},
		topics.RailsPayoutTopic:                        {"retention.ms": ms(48 * time.Hour), "min.insync.replicas": "2"},
	}
	for _, rc := range configs {
		have := map[string]string{}
		for _, c := range rc.Configs {
			have[c.Key] = c.MaybeValue()
		}
		for k, v := range want[rc.Name] {
			if have[k] != v {
				t.Errorf("%s %s = %q, want %q", rc.Name, k, have[k], v)
			}
		}
	}
	details, err := adm.ListTopics(ctx, topics.RepliesTopic, topics.CommandsTopic)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range details[topics.RepliesTopic].Partitions {
		if len(p.Replicas) != 3 {
			t.Errorf("replies partition %d has %d replicas, want 3", p.Partition, len(p.Replicas))
		}
	}
	if n := len(details[topics.CommandsTopic].Partitions); n != 2 {
		t.Errorf("the command topic has %d partitions: Provision must never add any (merchants would move)", n)
	}

	// A second start finds only what it cannot fix.
	again, err := topics.Provision(ctx, cl, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range again {
		if f.Fixed {
			t.Errorf("a config set by the first Provision is weaker again: %s", f)
		}
	}
	if len(again) != 2 {
		t.Errorf("second Provision: %v, want the replication and partition findings only", again)
	}
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
