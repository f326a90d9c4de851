package relay_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"

	"paysvc/storage/storagetest"
	"paysvc/topics"
)

// A relay of a namespace publishes the outbox, which keeps the logical topic
// names, to its namespace's topics, on a cluster that would create any other
// name it was sent; its metrics keep the logical names.
func TestRelay_Namespace(t *testing.T) {
	t.Parallel()
	// On a kfake of its own, whatever Kafka the other tests use: it creates any
	// topic a producer names (AllowAutoTopicCreation), so that a record sent
	// outside the namespace lands somewhere to be seen, and the test lists every
	// topic on the cluster. (On the real cluster every other relay test runs in a
	// fresh namespace, with auto-creation off: a record sent outside it is
	// refused, and never arrives where checkRecords looks.)
	k := newFakeKafka(t, kfake.AllowAutoTopicCreation())
	k.ns = topics.Namespace("relay-ns.")
	ns := k.ns
	k.ensureTopics(t)
	schema := storagetest.New(t)
	co := startConsumerOf(t, k, ns.Topic(eventTopic), eventTopic)
	rows := insertRows(t, schema.DB, "ns", 20)
	r, _ := startRelay(t, k, schema.DB, newProducer(t, k))
	r.Wake()
	recs := co.waitAll(t, rows, 20*time.Second)
	for _, rec := range recs {
		if rec.Topic != ns.Topic(eventTopic) {
			t.Errorf("event %s on %q, want %q", header(rec, "event_id"), rec.Topic, ns.Topic(eventTopic))
		}
	}
	waitOutboxEmpty(t, schema.DB, 5*time.Second)

	cl := k.client(t)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range list.Names() {
		if !strings.HasPrefix(name, string(ns)) {
			t.Errorf("topic %q on the cluster, outside the namespace", name)
		}
	}

	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, mf := range mfs {
		if mf.GetName() != "paysvc_relay_events_published_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "topic" {
					labels = append(labels, l.GetValue())
				}
			}
		}
	}
	if !slices.Contains(labels, eventTopic) {
		t.Errorf("published counter topics %q, want the logical %q", labels, eventTopic)
	}
	for _, l := range labels {
		if strings.HasPrefix(l, string(ns)) {
			t.Errorf("published counter labelled with the cluster's name %q", l)
		}
	}
}
