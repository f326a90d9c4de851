package engine_test

import (
	"paysvc/actors/values/waittest"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"paysvc/actors/values/ids"
	"paysvc/actors/values/money"
	"paysvc/topics"
)

// A commit that ends while the next poll still waits for its reads does not wait
// for that poll: the batch applied beside the commit is sealed and committed at
// once, and the poll goes into the batch after it. Here the poll's read of a new
// invoice id is held by a lock on the invoices table; the deposit applied before
// it is answered while that read still waits. (When every read ran under the
// partition's lock, the seal waited for the read and the apply: a tenth of an STK
// cycle on a busy machine, and here until the lock went.)
func TestCommitDoesNotWaitForAPollThatStillReads(t *testing.T) {
	b := setup(t)
	b.startEngine(t, "midround")
	b.fundedWorking(t, "100.00") // the partition is owned and its wallet actors live
	seals := counter(t, "paysvc_engine_seals_during_reads_total", "", "")

	r := readHeldMidCommit(t, b, "midround")

	r.release() // K commits while that read waits
	ok(t, await(t, r.firstReply, "the deposit of the held commit"))
	ok(t, await(t, r.secondReply, "the deposit applied beside it, while the next poll still reads"))
	select {
	case rep := <-r.pushReply:
		t.Fatalf("the push was answered while its read was held: %+v", rep)
	default:
	}
	if got := counter(t, "paysvc_engine_seals_during_reads_total", "", "") - seals; got < 1 {
		t.Errorf("seals during reads moved by %v", got)
	}

	if err := r.lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	ok(t, await(t, r.pushReply, "the push, once its read answered"))
	cmds := []string{r.first.ID, r.second.ID, r.push.ID}
	if n := b.count(t, `SELECT count(DISTINCT xmin::text) FROM processed_commands WHERE command_id = ANY($1)`, pq.StringArray(cmds)); n != 3 {
		t.Errorf("the three commands were committed in %d transactions, want 3 (one batch each)", n)
	}
	b.wantBalance(t, b.merchant, b.settle, "103.00")
	if n := b.count(t, `SELECT count(*) FROM invoices WHERE invoice_id = $1 AND merchant_id = $2 AND state = 'PENDING'`, r.inv, b.merchant); n != 1 {
		t.Errorf("%d PENDING invoices %s, want 1", n, r.inv)
	}
	b.ledgerOK(t)
}

// The commit that ends while a poll still reads can have failed: the seal that
// runs then finds it, throws away the batch applied beside it, and seeks the
// partition back. The poll that was reading meanwhile holds copies of records the
// consumer now brings again: they are dropped, not applied (they would look like
// a gap in the log), and every command is applied exactly once from the log.
func TestPollReadingWhenTheCommitFailsIsAppliedOnceFromTheLog(t *testing.T) {
	b := setup(t)
	b.startEngine(t, "midround-fail")
	b.fundedWorking(t, "100.00")
	ref := depositCmd(b, t, b.merchant, b.settle, "1.00")
	ok(t, b.send(t, ref))
	perDeposit := b.entriesOf(t, ref.ID)
	failures := counter(t, "paysvc_engine_batch_failures_total", "", "")

	r := readHeldMidCommit(t, b, "midround-fail")

	// K fails while that read waits (cancelled on its lock; a killed connection
	// would be retried by database/sql).
	if n := b.count(t, `SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`, r.holder); n == 0 {
		t.Fatal("no blocked commit to fail")
	}
	r.release()
	// The seal finds K failed: failed() counts it, then seeks the partition back
	// under the partition's lock, which the poll that reads must take to apply.
	waittest.Eventually(t, replyWait, func() (bool, string) {
		return counter(t, "paysvc_engine_batch_failures_total", "", "") != failures, "the seal never found the cancelled commit failed"
	})
	// The read still waits: the poll it belongs to was fetched before the seek.
	if n := b.count(t, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`, r.locker); n == 0 {
		t.Fatal("the poll's read was no longer waiting when the seal found the failure")
	}
	if err := r.lock.Rollback(); err != nil {
		t.Fatal(err)
	}

	ok(t, await(t, r.firstReply, "the deposit of the failed commit"))
	ok(t, await(t, r.secondReply, "the deposit applied beside it"))
	ok(t, await(t, r.pushReply, "the push that was reading"))
	if n := counter(t, "paysvc_engine_batch_failures_total", "", "") - failures; n != 1 {
		t.Errorf("%v batches failed, want 1 (the cancelled commit)", n)
	}
	for _, c := range []topics.Command{r.first, r.second} {
		if n := b.entriesOf(t, c.ID); n != perDeposit {
			t.Errorf("deposit %s left %d ledger entries, want %d (applied once)", c.ID, n, perDeposit)
		}
	}
	if n := b.count(t, `SELECT count(*) FROM processed_commands WHERE command_id = ANY($1)`,
		pq.StringArray([]string{r.first.ID, r.second.ID, r.push.ID})); n != 3 {
		t.Errorf("%d of 3 commands processed", n)
	}
	if n := b.count(t, `SELECT count(*) FROM invoices WHERE invoice_id = $1 AND merchant_id = $2 AND version = 1`, r.inv, b.merchant); n != 1 {
		t.Errorf("%d invoices %s at version 1, want 1 (opened once)", n, r.inv)
	}
	b.wantBalance(t, b.merchant, b.settle, "104.00") // 100 + the reference deposit + 1 + 2
	b.ledgerOK(t)
}

// heldRound is a poll caught reading while a commit is in flight: commit K holds
// the first deposit, the second was applied beside it into the open batch, and
// the next poll's STK push waits in its hydration read on a lock of the invoices
// table. release lets K go on; rolling lock back lets the read answer.
type heldRound struct {
	holder, locker                     int
	release                            func()
	lock                               *sqlx.Tx
	first, second, push                topics.Command
	firstReply, secondReply, pushReply <-chan topics.Reply
	inv                                string
}

func readHeldMidCommit(t *testing.T, b *engineBundle, apiRef string) *heldRound {
	t.Helper()
	r := &heldRound{}
	r.holder, r.release = holdCommits(t, b)
	r.first = depositCmd(b, t, b.merchant, b.settle, "1.00")
	r.firstReply = b.post(t, r.first)
	waitBlockedBy(t, b, r.holder) // commit K is in flight

	before := appliesDuringCommit(t)
	r.second = depositCmd(b, t, b.merchant, b.settle, "2.00")
	r.secondReply = b.post(t, r.second)
	waittest.Eventually(t, replyWait, func() (bool, string) { // applied into the open batch beside K
		return appliesDuringCommit(t) != before, "the second deposit was not applied beside the held commit"
	})

	lock, err := b.db.BeginTxx(b.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.lock = lock
	t.Cleanup(func() { _ = lock.Rollback() })
	if _, err := lock.ExecContext(b.ctx, `LOCK TABLE invoices IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	if err := lock.GetContext(b.ctx, &r.locker, `SELECT pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	r.inv = ids.Alias(8)
	r.push = b.command(t, topics.CmdInvoiceSTKPush, b.merchant, topics.InvoiceSTKPush{InvoiceID: r.inv,
		Phone: "254700000001", Amount: money.MustParse("10.00"), Tariff: "BUSINESS-PAYS", APIRef: apiRef})
	r.pushReply = b.post(t, r.push)
	waitBlockedBy(t, b, r.locker) // the poll's hydration read waits on the table lock
	return r
}
