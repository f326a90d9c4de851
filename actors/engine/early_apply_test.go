package engine_test

import (
	"paysvc/actors/values/waittest"
	"testing"
	"time"

	"github.com/lib/pq"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"paysvc/topics"
)

// series are the series of one metric of the default registry.
func series(t *testing.T, name string) []*dto.Metric {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}

// counter sums a counter of the default registry over the series whose label
// (if any is named) has the given value.
func counter(t *testing.T, name, label, value string) float64 {
	t.Helper()
	var n float64
	for _, m := range series(t, name) {
		match := label == ""
		for _, l := range m.GetLabel() {
			match = match || l.GetName() == label && l.GetValue() == value
		}
		if match {
			n += m.GetCounter().GetValue()
		}
	}
	return n
}

// histogramCount reads the observation count of a histogram of the default registry.
func histogramCount(t *testing.T, name string) uint64 {
	t.Helper()
	var n uint64
	for _, m := range series(t, name) {
		n += m.GetHistogram().GetSampleCount()
	}
	return n
}

// appliesDuringCommit reads paysvc_engine_batch_applies_total{when="during_commit"}.
func appliesDuringCommit(t *testing.T) float64 {
	return counter(t, "paysvc_engine_batch_applies_total", "when", "during_commit")
}

// holdCommits takes the row lock every commit of the command partitions needs
// first (the fence on partition_offsets), so the next commit stays in flight until
// release is called; it returns the lock holder's backend pid.
func holdCommits(t *testing.T, b *engineBundle) (holder int, release func()) {
	t.Helper()
	lock, err := b.db.BeginTxx(b.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lock.Rollback() })
	if _, err := lock.ExecContext(b.ctx, `SELECT 1 FROM partition_offsets WHERE topic = $1 FOR UPDATE`, topics.CommandsTopic); err != nil {
		t.Fatal(err)
	}
	if err := lock.GetContext(b.ctx, &holder, `SELECT pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	return holder, func() {
		if err := lock.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
}

// waitBlockedBy waits until a commit waits on the lock holder's row lock.
func waitBlockedBy(t *testing.T, b *engineBundle, holder int) {
	t.Helper()
	waittest.Eventually(t, replyWait, func() (bool, string) {
		return b.count(t, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`, holder) != 0, "no commit ever waited on the offset lock"
	})
}

// Commands that arrive during a commit are applied while it is in flight (their
// batch's apply overlaps it), not held until it ends; and if that commit then
// fails (here it is cancelled while it waits), the batch applied on top
// of it is thrown away with it and both are applied again from the log: every
// command takes effect exactly once and the money adds up.
func TestBatchAppliedDuringAFailingCommitIsAppliedAgainOnce(t *testing.T) {
	b := setup(t)
	b.startEngine(t, "early1")
	b.fundedWorking(t, "100.00") // the partition is owned and its actors live
	ref := depositCmd(b, t, b.merchant, b.settle, "1.00")
	ok(t, b.send(t, ref))
	perDeposit := b.entriesOf(t, ref.ID)
	if perDeposit == 0 {
		t.Fatal("a deposit left no ledger entries")
	}

	holder, release := holdCommits(t, b)
	var cmds []topics.Command
	var waits []<-chan topics.Reply
	send := func() {
		c := depositCmd(b, t, b.merchant, b.settle, "1.00")
		cmds, waits = append(cmds, c), append(waits, b.post(t, c))
	}
	send() // its commit waits on the lock
	waitBlockedBy(t, b, holder)

	before := appliesDuringCommit(t)
	for range 10 {
		send()
		time.Sleep(20 * time.Millisecond) // trickling in, each its own poll: the delay is the load's shape, not a wait
	}
	// Applied while the commit is still held: the counter moves before the release.
	waittest.Eventually(t, replyWait, func() (bool, string) {
		return appliesDuringCommit(t) != before, "the commands that arrived during the commit were not applied beside it"
	})
	// The commit in flight fails: it is cancelled while it waits. (A killed
	// connection would not do: database/sql runs the statement again on a new one.)
	failures := counter(t, "paysvc_engine_batch_failures_total", "", "")
	if n := b.count(t, `SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`, holder); n == 0 {
		t.Fatal("no blocked commit to fail")
	}
	release()

	for i, ch := range waits {
		ok(t, await(t, ch, "deposit "+cmds[i].ID))
	}
	// Exactly one failure: the cancelled commit. A batch kept from before it would
	// fail again on its stale snapshots (the version check stops it committing).
	if n := counter(t, "paysvc_engine_batch_failures_total", "", "") - failures; n != 1 {
		t.Errorf("%v batches failed, want 1 (the cancelled commit)", n)
	}
	b.wantBalance(t, b.merchant, b.settle, "112.00") // 100 + the reference deposit + 11
	for _, c := range cmds {
		if n := b.entriesOf(t, c.ID); n != perDeposit {
			t.Errorf("deposit %s left %d ledger entries, want %d (applied once)", c.ID, n, perDeposit)
		}
	}
	if n := b.count(t, `SELECT count(*) FROM processed_commands WHERE command_id = ANY($1)`, pq.StringArray(commandIDs(cmds))); n != len(cmds) {
		t.Errorf("%d of %d commands processed", n, len(cmds))
	}
	b.ledgerOK(t)
}

func commandIDs(cs []topics.Command) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}
