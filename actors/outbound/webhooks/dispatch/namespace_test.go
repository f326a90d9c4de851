package dispatch_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"paysvc/actors/outbound/webhooks/dispatch"
	"paysvc/topics"
)

// A dispatcher of a namespace reads its namespace's event topics only, as a
// member of its namespace's group: an event on the topic of the same name of
// another deployment sharing the cluster is not delivered, and deliveries keep
// the webhook topic.
func TestNamespace(t *testing.T) {
	t.Parallel()
	ns := topics.Namespace("dsp-ns.")
	b := setup(t, dispatch.Config{Namespace: ns})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := topics.EnsureTopics(ctx, b.producer, "", 1); err != nil { // the other deployment's
		t.Fatal(err)
	}
	foreign := newIDs(2)
	b.sendOn(topics.EventTopics[topics.WalletTransferEvent], b.merchant, "W-1", true, foreign[0])
	mine := b.publish("W-1", 3)
	b.sendOn(topics.EventTopics[topics.WalletTransferEvent], b.merchant, "W-1", true, foreign[1])
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
	if g := groups.Groups(); !slices.Equal(g, []string{ns.Group("paysvc-dispatcher")}) {
		t.Errorf("groups on the cluster %q, want only %q", g, ns.Group("paysvc-dispatcher"))
	}
}
