package dispatch_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"paysvc/actors/outbound/webhooks/dispatch"
	"paysvc/topics"
	"paysvc/topics/kafkatest"
)

// A dispatcher of a namespace reads its namespace's event topics only, as a
// member of its namespace's group: an event on the topic of the same name of
// another deployment sharing the cluster is not delivered, and deliveries keep
// the webhook topic.
func TestNamespace(t *testing.T) {
	t.Parallel()
	// On a kfake of its own: the other deployment is the empty namespace, and the
	// test lists every group on the cluster.
	t.Run("kfake", func(t *testing.T) {
		t.Parallel()
		testNamespace(t, newFakeKafka(t), "dsp-ns.", "", nil)
	})
	// On the real cluster too, when the tests have it: two fresh namespaces, and
	// the groups of those two are listed (the cluster is shared).
	t.Run("real", func(t *testing.T) {
		if !kafkatest.Real() {
			t.Skip("the tests run on kfake (topics/kafkatest)")
		}
		t.Parallel()
		brokers := kafkatest.Brokers(t)
		mine, other := kafkatest.NewNamespace(t, brokers), kafkatest.NewNamespace(t, brokers)
		testNamespace(t, brokers, mine, other, func(g string) bool {
			return strings.HasPrefix(g, string(mine)) || strings.HasPrefix(g, string(other))
		})
	})
}

// testNamespace runs a dispatcher of ns on brokers beside the topics of another
// deployment of namespace other; listed (nil: all) picks the groups looked at.
func testNamespace(t *testing.T, brokers []string, ns, other topics.Namespace, listed func(group string) bool) {
	b := setupOn(t, brokers, dispatch.Config{Namespace: ns})
	ensureTopics(t, b.producer, other) // the other deployment's
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	foreign := newIDs(2)
	b.sendOn(other.Topic(topics.EventTopics[topics.WalletTransferEvent]), b.merchant, "W-1", true, foreign[0])
	mine := b.publish("W-1", 3)
	b.sendOn(other.Topic(topics.EventTopics[topics.WalletTransferEvent]), b.merchant, "W-1", true, foreign[1])
	mine = append(mine, b.publish("W-1", 1)...) // after the second foreign one in time
	b.waitDelivered(len(mine))

	var got []string
	if err := b.db.DB.Select(&got, `SELECT event_id FROM webhook_deliveries WHERE topic = $1 ORDER BY event_id`,
		topics.WalletTransferEvent); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(mine)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("deliveries of %v, want exactly the namespace's %v", got, want)
	}
	var all int
	if err := b.db.DB.Get(&all, `SELECT count(*) FROM webhook_deliveries`); err != nil || all != len(mine) {
		t.Errorf("%d deliveries in all (%v), want %d", all, err, len(mine))
	}
	groups, err := kadm.NewClient(b.producer).ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g := groups.Groups()
	if listed != nil {
		g = slices.DeleteFunc(g, func(g string) bool { return !listed(g) })
	}
	if !slices.Equal(g, []string{ns.Group("paysvc-dispatcher")}) {
		t.Errorf("groups on the cluster %q, want only %q", g, ns.Group("paysvc-dispatcher"))
	}
}
