package engine_test

import (
	"testing"
	"time"

	"github.com/lib/pq"

	"paysvc/topics"
)

// Commands that arrive while a commit is in flight are gathered and committed
// together in the next transaction, however they trickle in: the engine keeps
// polling during the commit instead of applying the first one or two and waiting
// for the same commit with them (docs/benchmarks.md, session 5). The commit is
// held in flight by a row lock on the partition's offset, and the test reads
// which transaction wrote each processed command (xmin).
func TestCommandsArrivingDuringACommitShareTheNextTransaction(t *testing.T) {
	b := setup(t)
	b.startEngine(t, "g1")
	b.fundedWorking(t, "100.00") // the partition is owned and its actors live

	lock, err := b.db.BeginTxx(b.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback() //nolint:errcheck // released below; this is for a failed test
	if _, err := lock.ExecContext(b.ctx, `SELECT 1 FROM partition_offsets WHERE topic = $1 FOR UPDATE`, topics.CommandsTopic); err != nil {
		t.Fatal(err)
	}
	var holder int
	if err := lock.GetContext(b.ctx, &holder, `SELECT pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	first := depositCmd(b, t, b.merchant, b.settle, "1.00")
	firstReply, cancelFirst := b.hub.Register(first.ID)
	defer cancelFirst()
	b.produce(t, -1, first)
	deadline := time.Now().Add(replyWait)
	for b.count(t, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`, holder) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first command's commit never waited on the offset lock")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// The commit is in flight: ten more trickle in, one produce each.
	var later []string
	var waits []<-chan topics.Reply
	for range 10 {
		c := depositCmd(b, t, b.merchant, b.settle, "1.00")
		ch, cancel := b.hub.Register(c.ID)
		defer cancel()
		b.produce(t, -1, c)
		later, waits = append(later, c.ID), append(waits, ch)
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // fetched by now; the commit is still held
	waits0 := histogramCount(t, "paysvc_engine_commit_wait_seconds")
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
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
