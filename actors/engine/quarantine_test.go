package engine_test

import (
	"strings"
	"testing"
	"time"

	"paysvc/actors/values/ids"
	"paysvc/actors/values/money"
	"paysvc/storage"
	"paysvc/topics"
)

// quarantinedTotal sums paysvc_engine_commands_quarantined_total over its labels.
func quarantinedTotal(t *testing.T) float64 {
	return counter(t, "paysvc_engine_commands_quarantined_total", "", "")
}

// A command the database refuses every time (a NUL inside an invoice's jsonb
// snapshot fails the commit; a NUL in a wallet label fails a query while the batch
// is applied) must not stall its partition: the good commands around it commit
// once, each bad one is answered with a refusal and quarantined with its offset,
// the stored offset moves past it, and a restart does not meet it again.
func TestPoisonCommandsAreQuarantined(t *testing.T) {
	b := setup(t)
	stop := b.startEngine(t, "t1")
	w := b.fundedWorking(t, "100.00")
	before := quarantinedTotal(t)

	good1 := depositCmd(b, t, b.merchant, b.settle, "10.00")
	badCommit := b.command(t, topics.CmdInvoiceSTKPush, b.merchant, topics.InvoiceSTKPush{
		InvoiceID: ids.Alias(10), Phone: "254700000001", Amount: money.MustParse("100.00"), Tariff: "BUSINESS-PAYS", APIRef: "poison", Email: "a\x00@b.co"})
	good2 := transferCmd(b, t, b.merchant, b.settle, w, "5.00")
	badApply := createCmd(b, t, b.merchant, ids.Alias(10), "bad\x00label")
	good3 := depositCmd(b, t, b.merchant, b.settle, "1.00")
	cmds := []topics.Command{good1, badCommit, good2, badApply, good3}
	waits := b.waitFor(t, cmds...)
	// One produce call: the five records are consecutive in one partition and
	// normally reach the engine in one poll, so the first batch holds them all.
	part := b.produce(t, -1, cmds...)
	replies := make([]topics.Reply, len(cmds))
	start := time.Now()
	for i, ch := range waits {
		replies[i] = await(t, ch, cmds[i].Type)
	}
	t.Logf("five replies, two commands quarantined, in %v", time.Since(start))
	ok(t, replies[0])
	wantCode(t, replies[1], "unprocessable_command")
	ok(t, replies[2])
	wantCode(t, replies[3], "unprocessable_command")
	ok(t, replies[4])
	if d := replies[1].Error.Detail; strings.Contains(d, "SQLSTATE") || strings.Contains(d, "jsonb") {
		t.Errorf("refusal shows database internals: %q", d)
	}

	b.wantBalance(t, b.merchant, b.settle, "106.00")
	b.wantBalance(t, b.merchant, w, "5.00")
	for _, c := range []topics.Command{good1, good2, good3} {
		if n := b.entriesOf(t, c.ID); n == 0 {
			t.Errorf("good command %s left no ledger entries", c.ID)
		}
	}
	for _, c := range []topics.Command{badCommit, badApply} {
		if n := b.entriesOf(t, c.ID); n != 0 {
			t.Errorf("quarantined command %s left %d ledger entries", c.ID, n)
		}
	}
	if n := b.count(t, `SELECT count(*) FROM invoices WHERE merchant_id = $1`, b.merchant); n != 0 {
		t.Errorf("the quarantined STK push left %d invoices", n)
	}
	rows, err := storage.QuarantinedCommands(b.ctx, b.db, b.merchant, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("quarantine holds %d rows, want 2: %+v", len(rows), rows)
	}
	got := map[string]storage.QuarantinedCommand{}
	for _, r := range rows {
		got[r.CommandID] = r
	}
	if r := got[badCommit.ID]; r.ErrorCode != "22P05" || r.Type != topics.CmdInvoiceSTKPush || r.Partition != part {
		t.Errorf("quarantined STK push: %+v, want SQLSTATE 22P05 in partition %d", r, part)
	}
	if r := got[badApply.ID]; r.ErrorCode != "22021" || r.Type != topics.CmdWalletCreate {
		t.Errorf("quarantined wallet create: %+v, want SQLSTATE 22021", r)
	}
	if r := got[badCommit.ID]; r.Offset+2 != got[badApply.ID].Offset {
		t.Errorf("quarantined offsets %d and %d: want the two records two apart, as produced", r.Offset, got[badApply.ID].Offset)
	}
	if d := quarantinedTotal(t) - before; d != 2 {
		t.Errorf("paysvc_engine_commands_quarantined_total grew by %v, want 2", d)
	}
	next, err := storage.PartitionOffset(b.ctx, b.db, topics.CommandsTopic, part)
	if err != nil {
		t.Fatal(err)
	}
	if next != got[badApply.ID].Offset+2 {
		t.Errorf("stored offset %d, want %d (past the last command)", next, got[badApply.ID].Offset+2)
	}

	// A restart resumes past the quarantined commands: they are not applied, not
	// quarantined again, and a redelivery of one gets the same refusal.
	stop()
	b.startEngine(t, "t2")
	ok(t, b.send(t, depositCmd(b, t, b.merchant, b.settle, "2.00")))
	wantCode(t, b.send(t, badCommit), "unprocessable_command")
	b.wantBalance(t, b.merchant, b.settle, "108.00")
	if n := b.count(t, `SELECT count(*) FROM command_quarantine`); n != 2 {
		t.Errorf("after restart the quarantine holds %d rows, want 2", n)
	}
	b.ledgerOK(t)
}

// Among many commands, isolation halves the batches until the one bad command is
// alone; every good command is applied exactly once, whatever batch it fell in.
func TestPoisonCommandAmongManyIsFoundAndTheRestApplyOnce(t *testing.T) {
	b := setupRunning(t)
	ok(t, b.send(t, depositCmd(b, t, b.merchant, b.settle, "1.00")))
	const n, bad = 200, 137
	cmds := make([]topics.Command, n)
	for i := range cmds {
		if i == bad {
			cmds[i] = b.command(t, topics.CmdInvoiceSTKPush, b.merchant, topics.InvoiceSTKPush{
				InvoiceID: ids.Alias(10), Phone: "254700000001", Amount: money.MustParse("100.00"), Tariff: "BUSINESS-PAYS", APIRef: "poison\x00ref"})
		} else {
			cmds[i] = depositCmd(b, t, b.merchant, b.settle, "1.00")
		}
	}
	waits := b.waitFor(t, cmds...)
	b.produce(t, -1, cmds...)
	for i, ch := range waits {
		r := await(t, ch, cmds[i].Type)
		if i == bad {
			wantCode(t, r, "unprocessable_command")
		} else {
			ok(t, r)
		}
	}
	b.wantBalance(t, b.merchant, b.settle, "200.00") // 1.00 + 199 deposits of 1.00
	if got := b.count(t, `SELECT count(DISTINCT command_id) FROM ledger_entries`); got != n {
		t.Errorf("%d commands left ledger entries, want %d (the warm-up deposit and 199 good ones)", got, n)
	}
	if got := b.count(t, `SELECT count(*) FROM command_quarantine WHERE command_id = $1`, cmds[bad].ID); got != 1 {
		t.Errorf("the bad command is quarantined %d times, want once", got)
	}
	b.ledgerOK(t)
}
