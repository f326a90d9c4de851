package engine_test

import (
	"testing"

	"paysvc/actors/values/ids"
	"paysvc/actors/values/money"
	"paysvc/topics"
)

// Two merchants' STK pushes under one invoice id produced together: neither id is
// in the database when the batch is read (Kind.Taken finds nothing), so the second
// push meets the first's invoice in the partition and is refused with id_taken
// (the API draws another id): never quarantined, and the first invoice stays the
// first merchant's.
func TestInvoiceIDClashInOneBatchIsRefusedNotQuarantined(t *testing.T) {
	b := setup(t)
	stop := b.startEngine(t, "t1")
	defer stop()
	other, _ := b.newMerchant(t, "Merchant B", "sandbox")
	before := quarantinedTotal(t)
	id := ids.Alias(12)
	push := func(merchant string) topics.Command {
		return b.command(t, topics.CmdInvoiceSTKPush, merchant, topics.InvoiceSTKPush{
			InvoiceID: id, Phone: "254700000001", Amount: money.MustParse("100.00"), Tariff: "BUSINESS-PAYS", APIRef: "clash"})
	}
	cmds := []topics.Command{push(b.merchant), push(other)}
	waits := b.waitFor(t, cmds...)
	b.produce(t, 0, cmds...) // one partition, one produce: normally one batch
	ok(t, await(t, waits[0], "A's push"))
	wantCode(t, await(t, waits[1], "B's push"), "id_taken")
	if n := b.count(t, `SELECT count(*) FROM command_quarantine`); n != 0 {
		t.Errorf("%d commands quarantined", n)
	}
	if d := quarantinedTotal(t) - before; d != 0 {
		t.Errorf("paysvc_engine_commands_quarantined_total grew by %v", d)
	}
	if n := b.count(t, `SELECT count(*) FROM invoices WHERE invoice_id = $1 AND merchant_id = $2`, id, b.merchant); n != 1 {
		t.Errorf("A's invoice: %d rows", n)
	}
	if n := b.count(t, `SELECT count(*) FROM invoices WHERE merchant_id = $1`, other); n != 0 {
		t.Errorf("B has %d invoices", n)
	}
}

// The same for a wallet id: two merchants' creates of one id produced together.
func TestWalletIDClashInOneBatchIsRefusedNotQuarantined(t *testing.T) {
	b := setup(t)
	stop := b.startEngine(t, "t1")
	defer stop()
	other, _ := b.newMerchant(t, "Merchant B", "sandbox")
	id := ids.Alias(12)
	cmds := []topics.Command{createCmd(b, t, b.merchant, id, "mine"), createCmd(b, t, other, id, "theirs")}
	waits := b.waitFor(t, cmds...)
	b.produce(t, 0, cmds...)
	ok(t, await(t, waits[0], "A's wallet"))
	wantCode(t, await(t, waits[1], "B's wallet"), "id_taken")
	if n := b.count(t, `SELECT count(*) FROM command_quarantine`); n != 0 {
		t.Errorf("%d commands quarantined", n)
	}
	if n := b.count(t, `SELECT count(*) FROM wallets WHERE wallet_id = $1 AND merchant_id = $2`, id, b.merchant); n != 1 {
		t.Errorf("A's wallet: %d rows", n)
	}
}
