package callback_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/outbound/webhooks/callback"
	"paysvc/actors/outbound/webhooks/outbound"
	"paysvc/actors/values/ids"
	"paysvc/actors/values/waittest"
	"paysvc/storage"
	"paysvc/storage/storagetest"
	"paysvc/topics"
)

// poster records the callbacks posted (by their webhook-id) and answers 200.
type poster struct {
	mu  sync.Mutex
	ids []string
}

func (p *poster) Post(_ context.Context, _ string, headers map[string]string, _ []byte) (outbound.Response, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ids = append(p.ids, headers["webhook-id"])
	return outbound.Response{Status: 200}, nil
}

func (p *poster) posted() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.ids)
}

// The callbacks consumer of a namespace reads its namespace's callbacks topic
// only, as a member of its namespace's group, and commits there: a callback on
// the topic of the same name of another deployment sharing the cluster is not
// sent.
func TestRunNamespace(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	schema := storagetest.New(t)
	merchant, file := "MER"+ids.Alias(9), "PF"+ids.Alias(10)
	if err := storage.InsertMerchant(ctx, schema.DB, storage.Merchant{MerchantID: merchant, Name: "Files", Environment: "sandbox", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := schema.DB.ExecContext(ctx, `INSERT INTO payout_files (file_id, merchant_id, tracking_id, status, version, data, created_at, updated_at)
		VALUES ($1, $2, $3, 'PROCESSING', 1, '{}', now(), now())`, file, merchant, uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ns := topics.Namespace("cb-ns.")
	for _, n := range []topics.Namespace{ns, ""} { // this deployment's topics and another's
		if err := topics.EnsureTopics(ctx, cl, n, 2); err != nil {
			t.Fatal(err)
		}
	}
	produce := func(topic, id string) {
		t.Helper()
		v, _ := json.Marshal(topics.Callback{ID: id, MerchantID: merchant, URL: "https://files.example/cb", FileID: file,
			OccurredAt: time.Now(), Body: json.RawMessage(`{}`)})
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(file), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(topics.CallbackTopic, "cb-foreign")
	produce(ns.Topic(topics.CallbackTopic), "cb-mine")

	p := &poster{}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- callback.Run(runCtx, cluster.ListenAddrs(), ns, schema.DB, p, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	t.Cleanup(func() { stop(); <-done })

	// Sent, and its offset committed in the namespace's group on its topic.
	adm := kadm.NewClient(cl)
	group := ns.Group("paysvc-callbacks")
	deadline, _ := ctx.Deadline()
	waittest.Eventually(t, time.Until(deadline), func() (bool, string) {
		offs, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			if o, ok := offs.Lookup(ns.Topic(topics.CallbackTopic), partitionOf(t, ctx, adm, ns.Topic(topics.CallbackTopic))); ok && o.At == 1 {
				return true, ""
			}
		}
		return false, fmt.Sprintf("the callback's offset was never committed in %s; posted %v", group, p.posted())
	})
	produce(ns.Topic(topics.CallbackTopic), "cb-mine-2") // and the consumer goes on past it
	waittest.Eventually(t, time.Until(deadline), func() (bool, string) {
		got := p.posted()
		return slices.Contains(got, "cb-mine-2"), fmt.Sprintf("posted %v, want cb-mine-2 too", got)
	})
	if got := p.posted(); !slices.Equal(got, []string{"cb-mine", "cb-mine-2"}) {
		t.Errorf("posted %v, want the namespace's callbacks only, in order", got)
	}
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g := groups.Groups(); !slices.Equal(g, []string{group}) {
		t.Errorf("groups on the cluster %q, want only %q", g, group)
	}
}

// partitionOf is the partition holding the topic's only record.
func partitionOf(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) int32 {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	part := int32(-1)
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			part = o.Partition
		}
	})
	return part
}
