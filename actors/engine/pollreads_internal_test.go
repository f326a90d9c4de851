package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/topics"
)

// The poll's dedupe read can be taken before a commit of the partition ends, and
// that commit can be settled (its replies leaving uncommitted) before the batch is
// applied: a copy of one of its commands is then in neither the read nor
// uncommitted. It must be answered from recent with the committed reply, and never
// applied again. (No database here: applying it would need one, so a missed copy
// fails the test.)
func TestCopyOfACommitSettledAfterThePollReadIsAnsweredFromRecent(t *testing.T) {
	e := &Engine{log: slog.New(slog.NewTextHandler(io.Discard, nil)), kinds: registered{}}
	p := newPartition(0, 1, 10)
	payload, err := json.Marshal(topics.WalletDeposit{WalletID: "W1", Narrative: "x"})
	if err != nil {
		t.Fatal(err)
	}
	c := topics.Command{ID: "cmd-1", Type: topics.CmdWalletDeposit, MerchantID: "M1", ReplyTo: "api-1", Payload: payload}
	committed := topics.Reply{CommandID: c.ID, Result: json.RawMessage(`{"wallet_id":"W1"}`)}

	// The commit of batch K (which applied cmd-1) is in flight when the poll reads.
	ic := &inflightCommit{done: make(chan struct{}), next: 10, ids: []string{c.ID}}
	p.inflight, p.uncommitted[c.ID] = ic, committed
	v, err := topics.EncodeCommand(c)
	if err != nil {
		t.Fatal(err)
	}
	rec := &kgo.Record{Topic: topics.CommandsTopic, Offset: 10, Value: v}
	reads := &pollReads{cmds: map[*kgo.Record]*topics.Command{rec: &c}, done: map[string][]byte{}, doneTypes: map[string]string{}}

	// Then K commits and is settled before the batch is applied.
	close(ic.done)
	if !e.settle(context.Background(), p, false) {
		t.Fatal("settle reported the commit failed")
	}
	if _, still := p.uncommitted[c.ID]; still {
		t.Fatal("settled reply still in uncommitted")
	}

	ob := newOpenBatch(time.Now(), rec.Offset)
	if err := e.applyBatch(context.Background(), p, ob, []*kgo.Record{rec}, &round{reads: reads}, nil); err != nil {
		t.Fatalf("applyBatch: %v", err)
	}
	pr := ob.prepared(p)
	if len(pr.batch.Processed) != 0 || len(pr.batch.Entries) != 0 {
		t.Fatalf("the copy was applied again: %d processed, %d entries", len(pr.batch.Processed), len(pr.batch.Entries))
	}
	if len(pr.out) != 1 {
		t.Fatalf("%d replies, want 1", len(pr.out))
	}
	want, _ := topics.EncodeReply(committed)
	got, _ := topics.EncodeReply(pr.out[0].reply)
	if !bytes.Equal(got, want) {
		t.Fatalf("copy answered %s, want the committed reply %s", got, want)
	}
}

// A poll whose commands all have fresh ids makes no read of processed_commands at
// all (the engine here has no database: a read would fail the test), and counts
// them as fresh; a command with a derived id is read.
func TestPollOfFreshIDsMakesNoRead(t *testing.T) {
	e := &Engine{log: slog.New(slog.NewTextHandler(io.Discard, nil)), kinds: registered{}}
	var recs []*kgo.Record
	for i := range 5 {
		v, err := topics.EncodeCommand(topics.Command{ID: "fresh-" + string(rune('a'+i)), Type: topics.CmdWalletDeposit,
			MerchantID: "M1", FreshID: true, Payload: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Offset: int64(i), Value: v})
	}
	before := testutil.ToFloat64(dedupeIDs.WithLabelValues("fresh"))
	r := e.readPoll(context.Background(), [][]*kgo.Record{recs[:2], recs[2:]})
	if r.err != nil || len(r.done) != 0 || len(r.cmds) != 5 {
		t.Fatalf("readPoll: err %v, done %v, %d commands", r.err, r.done, len(r.cmds))
	}
	if got := testutil.ToFloat64(dedupeIDs.WithLabelValues("fresh")) - before; got != 5 {
		t.Fatalf("fresh ids counted %v, want 5", got)
	}
	for _, rec := range recs {
		if c, err := r.command(rec); err != nil || !c.FreshID {
			t.Fatalf("command of offset %d: %+v, %v", rec.Offset, c, err)
		}
	}
}
