package engine_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/engine/replies"
	"paysvc/actors/values/ids"
	"paysvc/topics"
)

// An engine of a namespace, on a cluster another deployment shares, applies the
// commands of its namespace's log only, as a member of its namespace's group;
// a reply for an instance in another process goes through its namespace's
// replies topic, where that instance's reader (replies.Remote, of the same
// namespace) finds it; and the offsets it stores keep the logical topic name.
func TestEngineNamespace(t *testing.T) {
	t.Parallel()
	ns := topics.Namespace("eng-" + ids.Alias(6) + ".")
	b := setupIn(t, ns)
	// The other deployment: the names as they are, and a command in its log.
	if err := topics.EnsureTopics(b.ctx, b.prod, "", 2); err != nil {
		t.Fatal(err)
	}
	foreign := depositCmd(b, t, b.merchant, b.settle, "7.00")
	v, err := topics.EncodeCommand(foreign)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.prod.ProduceSync(b.ctx, &kgo.Record{Topic: topics.CommandsTopic, Key: topics.CommandKey(b.merchant), Value: v}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// An API instance of another process: its hub is not in this process's
	// registry, so the engine answers it through Kafka.
	remoteHub := replies.NewHub("remote-" + ids.Alias(8))
	remoteHub.Close() // out of the in-process registry; its waiters still work
	remote, err := replies.NewRemote(b.ctx, b.brokers, ns, remoteHub, b.prod, logger())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() { done <- remote.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	b.startEngine(t, "ns1")
	ok(t, b.send(t, depositCmd(b, t, b.merchant, b.settle, "5.00")))
	c := depositCmd(b, t, b.merchant, b.settle, "1.00")
	c.ReplyTo = remoteHub.Instance()
	ch, unregister := remoteHub.Register(c.ID)
	defer unregister()
	b.produce(t, -1, c)
	if r := await(t, ch, "the remote instance's deposit"); r.CommandID != c.ID || r.Error != nil {
		t.Fatalf("remote reply %+v", r)
	}
	b.wantBalance(t, b.merchant, b.settle, "6.00")
	if n := b.count(t, `SELECT count(*) FROM processed_commands WHERE command_id = $1`, foreign.ID); n != 0 {
		t.Errorf("the other deployment's command was applied (%d)", n)
	}

	// Postgres keeps the logical name of the command topic.
	if n := b.count(t, `SELECT count(*) FROM partition_offsets WHERE topic <> $1`, topics.CommandsTopic); n != 0 {
		t.Errorf("%d partition offsets stored under another topic name than %s", n, topics.CommandsTopic)
	}
	if n := b.count(t, `SELECT count(*) FROM partition_offsets WHERE topic = $1 AND next_offset > 0`, topics.CommandsTopic); n == 0 {
		t.Error("no offset stored under the logical command topic")
	}

	// On the cluster: the namespace's group only, and nothing on the other
	// deployment's replies topic.
	adm := kadm.NewClient(b.prod)
	actx, acancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer acancel()
	groups, err := adm.ListGroups(actx)
	if err != nil {
		t.Fatal(err)
	}
	if got := groups.Groups(); !slices.Equal(got, []string{ns.Group("paysvc-engine")}) {
		t.Errorf("groups on the cluster %q, want only %q", got, ns.Group("paysvc-engine"))
	}
	ends, err := adm.ListEndOffsets(actx, topics.RepliesTopic)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset != 0 {
			t.Errorf("%d replies on the other deployment's %s[%d]", o.Offset, o.Topic, o.Partition)
		}
	})
}
