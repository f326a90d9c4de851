package storage_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"paysvc/actors/aggregates/wallet"
	"paysvc/actors/aggregates/wallet/walletstore"
	"paysvc/actors/values/ledger"
	"paysvc/actors/values/money"
	"paysvc/storage"
	"paysvc/storage/storagetest"
)

const testTopic = "paysvc.commands.v1"

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func amt(s string) money.Amount { return money.MustParse(s) }

// batchBundle is a migrated schema with two merchants and partition 0 claimed by "A".
type batchBundle struct {
	ctx   context.Context
	db    *sqlx.DB
	epoch int64
}

func setupBatch(t testing.TB) batchBundle {
	t.Helper()
	ctx := context.Background()
	s := storagetest.New(t)
	for _, m := range []string{"M1", "M2"} {
		if err := storage.InsertMerchant(ctx, s.DB, storage.Merchant{MerchantID: m, Name: m, Environment: "sandbox", Enabled: true}); err != nil {
			t.Fatal(err)
		}
	}
	epoch, next, err := storage.ClaimPartition(ctx, s.DB, testTopic, 0, "A")
	if err != nil {
		t.Fatal(err)
	}
	if epoch != 1 || next != 0 {
		t.Fatalf("first claim: epoch %d next %d, want 1, 0", epoch, next)
	}
	return batchBundle{ctx: ctx, db: s.DB, epoch: epoch}
}

// state is a wallet's row in the commit, as walletkind lays it out.
func state(id, merchant, balance string, version int64, created time.Time) storage.WalletRow {
	return walletstore.Row(wallet.State{WalletID: id, MerchantID: merchant, Currency: "KES", WalletType: wallet.TypeWorking,
		Label: "label " + id, CurrentBalance: amt(balance), AvailableBalance: amt(balance), Version: version,
		CreatedAt: created, UpdatedAt: created})
}

// depositEntries is a balanced deposit into walletID.
func depositEntries(commandID, txn, walletID, merchant, amount, running string) []storage.EntryWrite {
	rb := amt(running)
	return []storage.EntryWrite{
		{CommandID: commandID, Entry: ledger.Entry{TransactionID: txn, Account: ledger.WalletAccount(walletID), WalletID: walletID,
			MerchantID: merchant, Currency: "KES", Amount: amt(amount), RunningBalance: &rb, TransType: "DEPOSIT", Narrative: "n " + txn}},
		{CommandID: commandID, Entry: ledger.Entry{TransactionID: txn, Account: ledger.SandboxFunding, MerchantID: merchant,
			Currency: "KES", Amount: amt(amount).Neg(), TransType: "DEPOSIT", Narrative: "n " + txn}},
	}
}

func count(t *testing.T, db sqlx.QueryerContext, table string) int {
	t.Helper()
	var n int
	if err := sqlx.GetContext(context.Background(), db, &n, `SELECT count(*) FROM `+table); err != nil {
		t.Fatal(err)
	}
	return n
}

type tableCounts struct{ wallets, entries, processed, outbox int }

func counts(t *testing.T, db sqlx.QueryerContext) tableCounts {
	t.Helper()
	return tableCounts{count(t, db, "wallets"), count(t, db, "ledger_entries"), count(t, db, "processed_commands"), count(t, db, "outbox")}
}

func wantOffset(t *testing.T, b batchBundle, want int64) {
	t.Helper()
	off, err := storage.PartitionOffset(b.ctx, b.db, testTopic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if off != want {
		t.Fatalf("stored offset = %d, want %d", off, want)
	}
}

// firstBatch opens W1 and W2 for M1 with a deposit into W1, at offsets 0..2.
func firstBatch(b batchBundle) storage.Batch {
	return storage.Batch{
		Topic: testTopic, Partition: 0, Epoch: b.epoch, NextOffset: 3, At: t0,
		Wallets: []storage.WalletWrite{
			{Row: state("W1", "M1", "100.00", 2, t0)},
			{Row: state("W2", "M1", "0.00", 1, t0.Add(time.Second))},
		},
		Entries: depositEntries("C3", "TXN3", "W1", "M1", "100.00", "100.00"),
		Processed: []storage.Processed{
			{CommandID: "C1", MerchantID: "M1", Type: "wallet.create", Offset: 0, Reply: []byte(`{"command_id":"C1"}`)},
			{CommandID: "C2", MerchantID: "M1", Type: "wallet.create", Offset: 1, Reply: []byte(`{"command_id":"C2"}`)},
			{CommandID: "C3", MerchantID: "M1", Type: "wallet.deposit", Offset: 2, Reply: []byte(`{"command_id":"C3"}`)},
		},
		Outbox: []storage.OutboxEvent{{EventID: "E1", Topic: "paysvc.events.x.v1", Key: "W1", MerchantID: "M1", Body: []byte(`{"id":"E1"}`)}},
	}
}

func TestCommitBatch(t *testing.T) {
	t.Parallel()

	t.Run("WritesOffsetWalletsEntriesProcessedOutbox", func(t *testing.T) {
		t.Parallel()
		b := setupBatch(t)
		if err := storage.CommitBatch(b.ctx, b.db, firstBatch(b)); err != nil {
			t.Fatal(err)
		}
		wantOffset(t, b, 3)
		if got := counts(t, b.db); got != (tableCounts{wallets: 2, entries: 2, processed: 3, outbox: 1}) {
			t.Fatalf("rows %+v", got)
		}
		w1, err := walletstore.Get(b.ctx, b.db, "M1", "W1")
		if err != nil {
			t.Fatal(err)
		}
		if w1.Version != 2 || !w1.CurrentBalance.Equal(amt("100.00")) || !w1.AvailableBalance.Equal(amt("100.00")) ||
			w1.Label != "label W1" || w1.WalletType != wallet.TypeWorking || !w1.CreatedAt.Equal(t0) {
			t.Fatalf("W1 = %+v", w1)
		}
		var e struct {
			Account string       `db:"account"`
			Command string       `db:"command_id"`
			Amount  money.Amount `db:"amount"`
			Running *string      `db:"running_balance"`
			Wallet  *string      `db:"wallet_id"`
			Created time.Time    `db:"created_at"`
		}
		if err := sqlx.GetContext(b.ctx, b.db, &e, `SELECT account, command_id, amount, running_balance, wallet_id, created_at
			FROM ledger_entries WHERE account = $1`, ledger.SandboxFunding); err != nil {
			t.Fatal(err)
		}
		if e.Command != "C3" || !e.Amount.Equal(amt("-100.00")) || e.Running != nil || e.Wallet != nil || !e.Created.Equal(t0) {
			t.Fatalf("funding entry %+v: want C3, -100.00, NULL running balance and wallet", e)
		}
		var off int64
		if err := sqlx.GetContext(b.ctx, b.db, &off, `SELECT kafka_offset FROM processed_commands WHERE command_id = 'C2'`); err != nil {
			t.Fatal(err)
		}
		if off != 1 {
			t.Fatalf("C2 offset = %d", off)
		}
		ob, err := storage.FetchOutbox(b.ctx, b.db, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(ob) != 1 || ob[0].EventID != "E1" || ob[0].RecordKey != "W1" || string(ob[0].Body) != `{"id":"E1"}` {
			t.Fatalf("outbox %+v", ob)
		}
	})

	t.Run("UpdatesWalletWhenVersionMatches", func(t *testing.T) {
		t.Parallel()
		b := setupBatch(t)
		if err := storage.CommitBatch(b.ctx, b.db, firstBatch(b)); err != nil {
			t.Fatal(err)
		}
		w1 := state("W1", "M1", "60.00", 3, t0)
		w1.UpdatedAt = t0.Add(time.Hour)
		w1.Label = "renamed"
		w2 := state("W2", "M1", "40.00", 2, t0.Add(time.Second))
		r1, r2 := amt("60.00"), amt("40.00")
		err := storage.CommitBatch(b.ctx, b.db, storage.Batch{
			Topic: testTopic, Partition: 0, Epoch: b.epoch, NextOffset: 4, At: t0.Add(time.Hour),
			Wallets: []storage.WalletWrite{{Row: w1, PrevVersion: 2}, {Row: w2, PrevVersion: 1}},
			Entries: []storage.EntryWrite{
				{CommandID: "C4", Entry: ledger.Entry{TransactionID: "T4", Account: ledger.WalletAccount("W1"), WalletID: "W1", MerchantID: "M1",
					Currency: "KES", Amount: amt("-40.00"), RunningBalance: &r1, TransType: "TRANSFER"}},
				{CommandID: "C4", Entry: ledger.Entry{TransactionID: "T4", Account: ledger.WalletAccount("W2"), WalletID: "W2", MerchantID: "M1",
					Currency: "KES", Amount: amt("40.00"), RunningBalance: &r2, TransType: "TRANSFER"}},
			},
			Processed: []storage.Processed{{CommandID: "C4", MerchantID: "M1", Type: "wallet.transfer", Offset: 3, Reply: []byte(`{}`)}},
		})
		if err != nil {
			t.Fatal(err)
		}
		wantOffset(t, b, 4)
		got, err := walletstore.Load(b.ctx, b.db, "M1", []string{"W1", "W2", "NOPE"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 {
			t.Fatalf("walletstore.Load returned %d wallets", len(got))
		}
		if g := got["W1"]; g.Version != 3 || !g.CurrentBalance.Equal(amt("60.00")) || g.Label != "renamed" || !g.UpdatedAt.Equal(w1.UpdatedAt) {
			t.Fatalf("W1 = %+v", g)
		}
		if g := got["W2"]; g.Version != 2 || !g.AvailableBalance.Equal(amt("40.00")) {
			t.Fatalf("W2 = %+v", g)
		}
	})

	t.Run("StaleVersion_ErrStaleSnapshotWritesNothing", func(t *testing.T) {
		t.Parallel()
		b := setupBatch(t)
		if err := storage.CommitBatch(b.ctx, b.db, firstBatch(b)); err != nil {
			t.Fatal(err)
		}
		before := counts(t, b.db)
		err := storage.CommitBatch(b.ctx, b.db, storage.Batch{
			Topic: testTopic, Partition: 0, Epoch: b.epoch, NextOffset: 9, At: t0,
			Wallets: []storage.WalletWrite{
				{Row: state("W3", "M1", "0.00", 1, t0)},                   // a valid insert
				{Row: state("W2", "M1", "5.00", 2, t0), PrevVersion: 1},   // a valid update
				{Row: state("W1", "M1", "200.00", 3, t0), PrevVersion: 1}, // stale: W1 is at version 2
			},
			Entries:   depositEntries("C9", "TXN9", "W1", "M1", "100.00", "200.00"),
			Processed: []storage.Processed{{CommandID: "C9", MerchantID: "M1", Type: "wallet.deposit", Offset: 8, Reply: []byte(`{}`)}},
			Outbox:    []storage.OutboxEvent{{EventID: "E9", Topic: "x", Key: "W1", MerchantID: "M1", Body: []byte(`{}`)}},
		})
		if !errors.Is(err, storage.ErrStaleSnapshot) {
			t.Fatalf("err = %v, want ErrStaleSnapshot", err)
		}
		wantOffset(t, b, 3)
		if after := counts(t, b.db); after != before {
			t.Fatalf("rows changed by a stale batch: %+v -> %+v", before, after)
		}
		for id, want := range map[string]string{"W1": "100.00", "W2": "0.00"} {
			w, err := walletstore.Get(b.ctx, b.db, "M1", id)
			if err != nil {
				t.Fatal(err)
			}
			if !w.CurrentBalance.Equal(amt(want)) {
				t.Fatalf("%s balance %s after a stale batch, want %s", id, w.CurrentBalance, want)
			}
		}
	})

	t.Run("FailingStatement_RollsBackOffset", func(t *testing.T) {
		t.Parallel()
		b := setupBatch(t)
		if err := storage.CommitBatch(b.ctx, b.db, firstBatch(b)); err != nil {
			t.Fatal(err)
		}
		before := counts(t, b.db)
		// C1 is already processed: the processed insert fails after the entries were written.
		bt := storage.Batch{Topic: testTopic, Partition: 0, Epoch: b.epoch, NextOffset: 7, At: t0,
			Entries:   depositEntries("C1", "TXN1", "W2", "M1", "1.00", "1.00"),
			Processed: []storage.Processed{{CommandID: "C1", MerchantID: "M1", Type: "wallet.create", Offset: 6, Reply: []byte(`{}`)}},
		}
		if err := storage.CommitBatch(b.ctx, b.db, bt); err == nil {
			t.Fatal("a batch re-processing C1 committed")
		}
		wantOffset(t, b, 3)
		if after := counts(t, b.db); after != before {
			t.Fatalf("rows changed by a failed batch: %+v -> %+v", before, after)
		}
	})

	t.Run("Fencing_OldOwnerCannotCommit", func(t *testing.T) {
		t.Parallel()
		b := setupBatch(t) // owner A holds epoch 1
		epochB, nextB, err := storage.ClaimPartition(b.ctx, b.db, testTopic, 0, "B")
		if err != nil {
			t.Fatal(err)
		}
		if epochB != b.epoch+1 || nextB != 0 {
			t.Fatalf("B's claim: epoch %d next %d", epochB, nextB)
		}
		err = storage.CommitBatch(b.ctx, b.db, firstBatch(b)) // A's epoch
		if !errors.Is(err, storage.ErrFenced) {
			t.Fatalf("A's commit: err = %v, want ErrFenced", err)
		}
		wantOffset(t, b, 0)
		if got := counts(t, b.db); got != (tableCounts{}) {
			t.Fatalf("a fenced batch wrote rows: %+v", got)
		}
		var owner string
		if err := sqlx.GetContext(b.ctx, b.db, &owner, `SELECT owner FROM partition_offsets WHERE topic = $1 AND partition = 0`, testTopic); err != nil {
			t.Fatal(err)
		}
		if owner != "B" {
			t.Fatalf("owner = %q, want B", owner)
		}

		bb := firstBatch(b)
		bb.Epoch = epochB
		if err := storage.CommitBatch(b.ctx, b.db, bb); err != nil {
			t.Fatalf("B's commit: %v", err)
		}
		wantOffset(t, b, 3)
		if got := counts(t, b.db); got != (tableCounts{wallets: 2, entries: 2, processed: 3, outbox: 1}) {
			t.Fatalf("rows after B's commit %+v", got)
		}
	})

	t.Run("ClaimPartition_ResumesFromStoredOffset", func(t *testing.T) {
		t.Parallel()
		b := setupBatch(t)
		if err := storage.CommitBatch(b.ctx, b.db, firstBatch(b)); err != nil {
			t.Fatal(err)
		}
		epoch, next, err := storage.ClaimPartition(b.ctx, b.db, testTopic, 0, "C")
		if err != nil {
			t.Fatal(err)
		}
		if epoch != 2 || next != 3 {
			t.Fatalf("claim after commit: epoch %d next %d, want 2, 3", epoch, next)
		}
		// Other partitions are independent.
		epoch, next, err = storage.ClaimPartition(b.ctx, b.db, testTopic, 1, "C")
		if err != nil {
			t.Fatal(err)
		}
		if epoch != 1 || next != 0 {
			t.Fatalf("claim of partition 1: epoch %d next %d, want 1, 0", epoch, next)
		}
	})

	t.Run("PartitionOffset_UnknownIsMinusOne", func(t *testing.T) {
		t.Parallel()
		b := setupBatch(t)
		off, err := storage.PartitionOffset(b.ctx, b.db, testTopic, 42)
		if err != nil {
			t.Fatal(err)
		}
		if off != -1 {
			t.Fatalf("offset = %d, want -1", off)
		}
	})
}

func TestProcessedReplies(t *testing.T) {
	t.Parallel()

	setup := func(t *testing.T) batchBundle {
		b := setupBatch(t)
		bt := firstBatch(b)
		bt.Processed = append(bt.Processed, storage.Processed{CommandID: "B1", MerchantID: "M2", Type: "wallet.create", Offset: 2, Reply: []byte(`{"command_id":"B1"}`)})
		if err := storage.CommitBatch(b.ctx, b.db, bt); err != nil {
			t.Fatal(err)
		}
		return b
	}

	t.Run("ProcessedReplies_OnlyKnownIDs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		got, types, err := storage.ProcessedReplies(b.ctx, b.db, []string{"C1", "C3", "NOPE", "B1"})
		if err != nil {
			t.Fatal(err)
		}
		// The type each id was applied as, so a reused id of another type is told apart.
		if types["B1"] != "wallet.create" || len(types) != 3 {
			t.Fatalf("ProcessedReplies types = %q", types)
		}
		if len(got) != 3 || string(got["C1"]) != `{"command_id":"C1"}` || string(got["C3"]) != `{"command_id":"C3"}` || got["B1"] == nil {
			t.Fatalf("ProcessedReplies = %q", got)
		}
		if _, ok := got["NOPE"]; ok {
			t.Fatal("unknown id reported as processed")
		}
		empty, _, err := storage.ProcessedReplies(b.ctx, b.db, nil)
		if err != nil || len(empty) != 0 {
			t.Fatalf("ProcessedReplies(nil) = %v, %v", empty, err)
		}
	})

	t.Run("ProcessedReply_ScopedByMerchant", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		reply, ok, err := storage.ProcessedReply(b.ctx, b.db, "M1", "C2")
		if err != nil || !ok || string(reply) != `{"command_id":"C2"}` {
			t.Fatalf("own reply: %q %v %v", reply, ok, err)
		}
		reply, ok, err = storage.ProcessedReply(b.ctx, b.db, "M2", "C2")
		if err != nil || ok || reply != nil {
			t.Fatalf("another merchant's command: %q %v %v, want not found", reply, ok, err)
		}
		if _, ok, err := storage.ProcessedReply(b.ctx, b.db, "M1", "NOPE"); err != nil || ok {
			t.Fatalf("unknown command: %v %v", ok, err)
		}
		if _, ok, err := storage.ProcessedReply(b.ctx, b.db, "M2", "B1"); err != nil || !ok {
			t.Fatalf("M2's own command: %v %v", ok, err)
		}
	})
}

func TestWalletReads(t *testing.T) {
	t.Parallel()

	// setup stores five wallets of M1 (created one second apart) and one of M2, and
	// three deposits into W0.
	setup := func(t *testing.T) batchBundle {
		b := setupBatch(t)
		bt := storage.Batch{Topic: testTopic, Partition: 0, Epoch: b.epoch, NextOffset: 1, At: t0}
		for i := 4; i >= 0; i-- { // inserted in reverse to prove the read order is created_at
			bal := "0.00"
			if i == 0 {
				bal = "6.00"
			}
			bt.Wallets = append(bt.Wallets, storage.WalletWrite{Row: state(fmt.Sprintf("W%d", i), "M1", bal, 1, t0.Add(time.Duration(i)*time.Second))})
		}
		bt.Wallets = append(bt.Wallets, storage.WalletWrite{Row: state("X0", "M2", "0.00", 1, t0)})
		for i, running := range []string{"1.00", "3.00", "6.00"} {
			bt.Entries = append(bt.Entries, depositEntries("C", fmt.Sprintf("T%d", i+1), "W0", "M1", fmt.Sprintf("%d.00", i+1), running)...)
		}
		if err := storage.CommitBatch(b.ctx, b.db, bt); err != nil {
			t.Fatal(err)
		}
		return b
	}

	t.Run("ListWallets_PaginatesOldestFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var seen []string
		for offset := 0; offset < 6; offset += 2 {
			page, total, err := walletstore.List(b.ctx, b.db, "M1", 2, offset)
			if err != nil {
				t.Fatal(err)
			}
			if total != 5 {
				t.Fatalf("total = %d, want 5", total)
			}
			for _, w := range page {
				if w.MerchantID != "M1" {
					t.Fatalf("listed another merchant's wallet %+v", w)
				}
				seen = append(seen, w.WalletID)
			}
		}
		if fmt.Sprint(seen) != "[W0 W1 W2 W3 W4]" {
			t.Fatalf("pages = %v", seen)
		}
		page, _, err := walletstore.List(b.ctx, b.db, "M1", 2, 10)
		if err != nil || page == nil || len(page) != 0 {
			t.Fatalf("page past the end = %v, %v; want empty, non-nil", page, err)
		}
	})

	// One read for several merchants returns each id only with the merchant it was
	// named with: M2 naming M1's W1 gets nothing, and a missing id is absent.
	t.Run("LoadOwnedWallets_ScopedByPair", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var o storage.Owned
		o.Add("M1", "W0")
		o.Add("M2", "X0")
		o.Add("M2", "W1")
		o.Add("M1", "NOPE")
		got, err := walletstore.LoadOwned(b.ctx, b.db, o)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got["W0"].MerchantID != "M1" || !got["W0"].CurrentBalance.Equal(amt("6.00")) || got["X0"].MerchantID != "M2" {
			t.Fatalf("owned wallets = %+v", got)
		}
		if got, err := walletstore.LoadOwned(b.ctx, b.db, storage.Owned{}); err != nil || len(got) != 0 {
			t.Fatalf("no ids: %v, %v", got, err)
		}
	})

	t.Run("ListWallets_ScopedByMerchant", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		page, total, err := walletstore.List(b.ctx, b.db, "M2", 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		if total != 1 || len(page) != 1 || page[0].WalletID != "X0" {
			t.Fatalf("M2's wallets: %d %+v", total, page)
		}
		page, total, err = walletstore.List(b.ctx, b.db, "NOBODY", 10, 0)
		if err != nil || total != 0 || len(page) != 0 {
			t.Fatalf("unknown merchant: %d %+v %v", total, page, err)
		}
	})

	t.Run("GetWallet_ForeignMerchantNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if _, err := walletstore.Get(b.ctx, b.db, "M2", "W0"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
		if _, err := walletstore.Get(b.ctx, b.db, "M1", "NOPE"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
		w, err := walletstore.Get(b.ctx, b.db, "M1", "W0")
		if err != nil || !w.CurrentBalance.Equal(amt("6.00")) {
			t.Fatalf("own wallet: %+v %v", w, err)
		}
		got, err := walletstore.Load(b.ctx, b.db, "M2", []string{"W0", "X0"})
		if err != nil {
			t.Fatal(err)
		}
		if _, leaked := got["W0"]; leaked || len(got) != 1 {
			t.Fatalf("walletstore.Load for M2 returned %v", got)
		}
	})

	t.Run("Statement_NewestFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rows, total, err := storage.Statement(b.ctx, b.db, "M1", "W0", 2, 0)
		if err != nil {
			t.Fatal(err)
		}
		if total != 3 || len(rows) != 2 {
			t.Fatalf("total %d rows %d", total, len(rows))
		}
		if rows[0].TransactionID != "T3" || !rows[0].Value.Equal(amt("3.00")) || !rows[0].RunningBalance.Equal(amt("6.00")) ||
			rows[1].TransactionID != "T2" || !rows[1].RunningBalance.Equal(amt("3.00")) {
			t.Fatalf("statement page 1: %+v", rows)
		}
		if rows[0].EntryID <= rows[1].EntryID {
			t.Fatalf("entry ids not descending: %d, %d", rows[0].EntryID, rows[1].EntryID)
		}
		rows, _, err = storage.Statement(b.ctx, b.db, "M1", "W0", 2, 2)
		if err != nil || len(rows) != 1 || rows[0].TransactionID != "T1" {
			t.Fatalf("statement page 2: %+v %v", rows, err)
		}
		rows, total, err = storage.Statement(b.ctx, b.db, "M2", "W0", 10, 0)
		if err != nil || total != 0 || len(rows) != 0 {
			t.Fatalf("another merchant's statement: %d %+v %v", total, rows, err)
		}
	})

	t.Run("SettlementWalletAndLabelTaken", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		if _, err := walletstore.Settlement(b.ctx, b.db, "M1", "KES"); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound (no settlement wallet yet)", err)
		}
		taken, err := storage.LabelTaken(b.ctx, b.db, "M1", "KES", "LABEL w1")
		if err != nil || !taken {
			t.Fatalf("LabelTaken case-insensitive = %v, %v", taken, err)
		}
		taken, err = storage.LabelTaken(b.ctx, b.db, "M2", "KES", "label W1")
		if err != nil || taken {
			t.Fatalf("LabelTaken across merchants = %v, %v", taken, err)
		}
	})
}
