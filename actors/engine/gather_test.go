package engine_test

import (
	"fmt"
	"paysvc/actors/values/waittest"
	"testing"
	"time"

	"github.com/lib/pq"

	"paysvc/topics"
)

// Commands that arrive while a commit is in flight are gathered and committed
// together in the next transaction, however they trickle in: the engine keeps
// polling during the commit instead of applying the first one or two and waiting
// for the same commit with them (docs/benchmarks-history.md). The commit is
// held in flight by a row lock on the partition's offset, and the test reads
// which transaction wrote each processed command (xmin).
func TestCommandsArrivingDuringACommitShareTheNextTransaction(t *testing.T) {
	b := setup(t)
	b.startEngine(t, "g1")
	b.fundedWorking(t, "100.00") // the partition is owned and its actors live

	holder, release := holdCommits(t, b)
	first := depositCmd(b, t, b.merchant, b.settle, "1.00")
	firstReply, cancelFirst := b.hub.Register(first.ID)
	defer cancelFirst()
	b.produce(t, -1, first)
	waitBlockedBy(t, b, holder) // the first command's commit waits on the offset lock

	// The commit is in flight: ten more trickle in, one produce each.
	applied0 := counter(t, "paysvc_engine_batch_applied_commands_total", "when", "during_commit")
	var later []string
	var waits []<-chan topics.Reply
	for range 10 {
		c := depositCmd(b, t, b.merchant, b.settle, "1.00")
		later, waits = append(later, c.ID), append(waits, b.post(t, c))
		time.Sleep(20 * time.Millisecond) // trickling in, each its own poll: not a wait for anything
	}
	// All ten are applied into the open batch beside the held commit.
	waittest.Eventually(t, replyWait, func() (bool, string) {
		return counter(t, "paysvc_engine_batch_applied_commands_total", "when", "during_commit")-applied0 >= 10, fmt.Sprintf("%v of the ten commands applied beside the held commit after %v",
			counter(t, "paysvc_engine_batch_applied_commands_total", "when", "during_commit")-applied0, replyWait)
	})
	waits0 := histogramCount(t, "paysvc_engine_commit_wait_seconds")
	release()
	ok(t, await(t, firstReply, "the first deposit"))
	for i, ch := range waits {
		ok(t, await(t, ch, "deposit "+later[i]))
	}

	if n := b.count(t, `SELECT count(DISTINCT xmin::text) FROM processed_commands WHERE command_id = ANY($1)`, pq.StringArray(later)); n != 1 {
		t.Fatalf("the ten commands that arrived during one commit were committed in %d transactions, want 1", n)
	}
	if n := b.count(t, `SELECT count(*) FROM processed_commands WHERE command_id = ANY($1)`, pq.StringArray(later)); n != 10 {
		t.Fatalf("%d of the ten commands processed", n)
	}
	b.wantBalance(t, b.merchant, b.settle, "111.00")
	b.ledgerOK(t)
	// That batch was applied during the held commit, so its wait after that commit
	// ended (the database's idle time before the next) was measured.
	if histogramCount(t, "paysvc_engine_commit_wait_seconds") == waits0 {
		t.Error("no commit wait observed for the batch applied during the held commit")
	}
}
