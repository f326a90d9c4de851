package storage_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"paysvc/actors/aggregates/invoice"
	"paysvc/actors/aggregates/invoice/invoicestore"
	"paysvc/actors/aggregates/payout"
	"paysvc/actors/aggregates/payout/payoutstore"
	"paysvc/storage"
)

// rawRows is an aggregate's writes given as they are sent, for aggregates that
// exist only in a test (as the next real aggregate would, before its Go type).
type rawRows struct{ kind, rows string }

func (r rawRows) Kind() string                   { return r.kind }
func (r rawRows) Rows() (json.RawMessage, error) { return json.RawMessage(r.rows), nil }

// aggBatch is a batch at the given offset that carries only aggregates' rows and
// one processed command (so a failed batch visibly writes nothing).
func aggBatch(b batchBundle, next int64, aggs ...storage.AggregateRows) storage.Batch {
	return storage.Batch{Topic: testTopic, Partition: 0, Epoch: b.epoch, NextOffset: next, At: t0,
		Processed:  []storage.Processed{{CommandID: fmt.Sprintf("A%d", next), MerchantID: "M1", Type: "x", Offset: next - 1, Reply: []byte(`{}`)}},
		Aggregates: aggs}
}

func pqCode(err error) string {
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		return string(pqErr.Code)
	}
	return ""
}

func inv(id string, version int64, state string, at time.Time) invoice.State {
	return invoice.State{InvoiceID: id, MerchantID: "M1", WalletID: "W1", State: state, Provider: "M-PESA", Currency: "KES",
		Value: amt("10.00"), Charges: amt("0.30"), NetAmount: amt("9.70"), APIRef: "ref-" + id, Version: version,
		CreatedAt: t0, UpdatedAt: at}
}

func TestCommitBatchAggregates(t *testing.T) {
	t.Parallel()

	t.Run("Invoice_InsertThenVersionCheckedUpdate", func(t *testing.T) {
		t.Parallel()
		b := setupBatch(t)
		w := storage.NewInvoiceWrites()
		invoicestore.Touch(w, invoice.State{}, inv("I1", 1, invoice.StatePending, t0))
		invoicestore.Touch(w, invoice.State{}, inv("I2", 1, invoice.StatePending, t0))
		if err := storage.CommitBatch(b.ctx, b.db, aggBatch(b, 1, w)); err != nil {
			t.Fatal(err)
		}
		// The engine's hydration read: an id only with the merchant it is named with.
		var o storage.Owned
		o.Add("M1", "I1")
		o.Add("M2", "I2") // M1's invoice, named by M2
		o.Add("M1", "NOPE")
		if got, err := invoicestore.LoadOwned(b.ctx, b.db, o); err != nil || len(got) != 1 || got["I1"].Version != 1 {
			t.Fatalf("owned invoices = %+v, %v", got, err)
		}
		// Two changes of I1 in one batch: one update, checked against the version
		// the batch started from.
		w = storage.NewInvoiceWrites()
		p := inv("I1", 2, invoice.StateProcessing, t0.Add(time.Second))
		p.CheckoutRequestID = "ws_1"
		invoicestore.Touch(w, inv("I1", 1, invoice.StatePending, t0), p)
		c := inv("I1", 3, invoice.StateComplete, t0.Add(2*time.Second))
		c.CheckoutRequestID = "ws_1"
		invoicestore.Touch(w, p, c)
		if err := storage.CommitBatch(b.ctx, b.db, aggBatch(b, 2, w)); err != nil {
			t.Fatal(err)
		}
		got, err := invoicestore.Get(b.ctx, b.db, "M1", "I1")
		if err != nil {
			t.Fatal(err)
		}
		if got.State != invoice.StateComplete || got.Version != 3 || !got.UpdatedAt.Equal(c.UpdatedAt) || got.APIRef != "ref-I1" {
			t.Fatalf("I1 = %+v", got)
		}
		ref, err := storage.InvoiceByCheckoutRequest(b.ctx, b.db, "ws_1")
		if err != nil || ref.InvoiceID != "I1" {
			t.Fatalf("by checkout request: %+v %v", ref, err)
		}

		// I2 is at version 1, not 2: the whole batch is refused.
		w = storage.NewInvoiceWrites()
		invoicestore.Touch(w, inv("I2", 2, invoice.StatePending, t0), inv("I2", 3, invoice.StateFailed, t0))
		err = storage.CommitBatch(b.ctx, b.db, aggBatch(b, 3, w))
		if !errors.Is(err, storage.ErrStaleSnapshot) {
			t.Fatalf("stale invoice: err = %v, want ErrStaleSnapshot", err)
		}
		wantOffset(t, b, 2)
		if got, _ := invoicestore.Get(b.ctx, b.db, "M1", "I2"); got.Version != 1 || got.State != invoice.StatePending {
			t.Fatalf("I2 after a stale batch: %+v", got)
		}
	})

	t.Run("Payout_HeaderAndOnlyChangedTransactions", func(t *testing.T) {
		t.Parallel()
		b := setupBatch(t)
		f := payout.State{Header: payout.Header{FileID: "F1", TrackingID: "7d8f9e5a-2c1b-4e0a-9f3d-1a2b3c4d5e6f", MerchantID: "M1",
			WalletID: "W1", Provider: "MPESA-B2C", Currency: "KES", Status: payout.StatusProcessing, TotalAmount: amt("3.00"),
			ChargeEstimate: amt("0.00"), Held: amt("3.00"), PaidAmount: amt("0.00"), FailedAmount: amt("0.00"),
			ActualCharges: amt("0.00"), Count: 3, Version: 1, CreatedAt: t0, UpdatedAt: t0}}
		for i := range 3 {
			f.Txns = append(f.Txns, payout.Txn{TransactionID: fmt.Sprintf("T%d", i), Account: "254700000000", Amount: amt("1.00"),
				Charge: amt("0.00"), IdempotencyKey: fmt.Sprintf("k%d", i), Status: payout.TxnPending, CreatedAt: t0, UpdatedAt: t0})
		}
		w := payoutstore.NewWrites()
		w.Touch(payout.State{}, f, []int{0, 1, 2})
		if err := storage.CommitBatch(b.ctx, b.db, aggBatch(b, 1, w)); err != nil {
			t.Fatal(err)
		}
		// T1 then T2 finish in two commands of one batch; T0 is not written again.
		g := f
		g.Txns = append([]payout.Txn(nil), f.Txns...)
		g.Version, g.Finished = 2, 1
		g.Txns[1].Status = payout.TxnComplete
		h := g
		h.Txns = append([]payout.Txn(nil), g.Txns...)
		h.Version, h.Finished = 3, 2
		h.Txns[2].Status = payout.TxnFailed
		w = payoutstore.NewWrites()
		w.Touch(f, g, []int{1})
		w.Touch(g, h, []int{2})
		if _, err := b.db.ExecContext(b.ctx, `UPDATE payout_transactions SET data = '{"untouched":true}' WHERE transaction_id = 'T0'`); err != nil {
			t.Fatal(err)
		}
		if err := storage.CommitBatch(b.ctx, b.db, aggBatch(b, 2, w)); err != nil {
			t.Fatal(err)
		}
		var rows []struct {
			ID     string `db:"transaction_id"`
			Status string `db:"status"`
			Claims bool   `db:"claims_key"`
			Data   string `db:"data"`
		}
		if err := sqlx.SelectContext(b.ctx, b.db, &rows, `SELECT transaction_id, status, claims_key, data::text FROM payout_transactions ORDER BY seq`); err != nil {
			t.Fatal(err)
		}
		if len(rows) != 3 || rows[0].Data != `{"untouched": true}` || rows[1].Status != payout.TxnComplete || !rows[1].Claims ||
			rows[2].Status != payout.TxnFailed || rows[2].Claims {
			t.Fatalf("transactions %+v", rows)
		}
		files, err := payoutstore.Load(b.ctx, b.db, "M1", []string{"F1"})
		if err != nil || files["F1"].Version != 3 || files["F1"].Finished != 2 {
			t.Fatalf("file %+v %v", files["F1"].Header, err)
		}

		// The header is version-checked: a writer that started from version 2 is stale.
		w = payoutstore.NewWrites()
		w.Touch(g, h, []int{0})
		if err := storage.CommitBatch(b.ctx, b.db, aggBatch(b, 3, w)); !errors.Is(err, storage.ErrStaleSnapshot) {
			t.Fatalf("stale file: err = %v, want ErrStaleSnapshot", err)
		}
		wantOffset(t, b, 2)
	})

	// A new aggregate is its table, its function and its row in batch_aggregates
	// (what its migration holds) and a type implementing AggregateRows: nothing in
	// the core changes, and its errors come back as the core's would.
	t.Run("NewAggregate_OwnMigrationOnly", func(t *testing.T) {
		t.Parallel()
		b := setupBatch(t)
		if _, err := b.db.ExecContext(b.ctx, `
			CREATE TABLE notes (note_id text PRIMARY KEY, body text NOT NULL, version bigint NOT NULL, at timestamptz NOT NULL);
			CREATE FUNCTION paysvc_apply_note(p_rows jsonb, p_at timestamptz) RETURNS void LANGUAGE plpgsql AS $$
			DECLARE r record; n bigint;
			BEGIN
				FOR r IN SELECT * FROM jsonb_to_recordset(p_rows) AS x(note_id text, body text, version bigint, prev bigint) LOOP
					IF r.prev = 0 THEN
						INSERT INTO notes VALUES (r.note_id, r.body, r.version, p_at);
					ELSE
						UPDATE notes SET body = r.body, version = r.version, at = p_at WHERE note_id = r.note_id AND version = r.prev;
						GET DIAGNOSTICS n = ROW_COUNT;
						IF n <> 1 THEN RAISE EXCEPTION 'stale note %', r.note_id USING ERRCODE = 'PS002'; END IF;
					END IF;
				END LOOP;
			END $$;
			INSERT INTO batch_aggregates (kind, description) VALUES ('note', 'a test aggregate')`); err != nil {
			t.Fatal(err)
		}
		inv1 := storage.NewInvoiceWrites()
		invoicestore.Touch(inv1, invoice.State{}, inv("I1", 1, invoice.StatePending, t0))
		note := rawRows{"note", `[{"note_id":"N1","body":"hello","version":1,"prev":0}]`}
		bt := aggBatch(b, 1, note, inv1)
		bt.Wallets = []storage.WalletWrite{{Row: state("W1", "M1", "0.00", 1, t0)}}
		if err := storage.CommitBatch(b.ctx, b.db, bt); err != nil {
			t.Fatal(err)
		}
		var body string
		var at time.Time
		if err := b.db.QueryRowxContext(b.ctx, `SELECT body, at FROM notes WHERE note_id = 'N1'`).Scan(&body, &at); err != nil {
			t.Fatal(err)
		}
		if body != "hello" || !at.Equal(t0) {
			t.Fatalf("note %q at %v", body, at)
		}
		if _, err := invoicestore.Get(b.ctx, b.db, "M1", "I1"); err != nil {
			t.Fatalf("the invoice of the same batch: %v", err)
		}

		stale := rawRows{"note", `[{"note_id":"N1","body":"again","version":3,"prev":2}]`}
		if err := storage.CommitBatch(b.ctx, b.db, aggBatch(b, 2, stale)); !errors.Is(err, storage.ErrStaleSnapshot) {
			t.Fatalf("stale note: err = %v, want ErrStaleSnapshot", err)
		}
		// Bad data inside an aggregate's function keeps its SQLSTATE: the engine
		// tells a poison command (class 22/23/54) from a transient failure by it.
		for rows, code := range map[string]string{
			`[{"note_id":"N1","body":"dup","version":1,"prev":0}]`:   "23505", // unique violation
			`[{"note_id":"N2","body":null,"version":1,"prev":0}]`:    "23502", // not null
			`[{"note_id":"N3","body":"x","version":"abc","prev":0}]`: "22P02", // invalid text representation
		} {
			err := storage.CommitBatch(b.ctx, b.db, aggBatch(b, 2, rawRows{"note", rows}))
			if got := pqCode(err); got != code {
				t.Fatalf("%s: err = %v (SQLSTATE %q), want %s", rows, err, got, code)
			}
		}
		wantOffset(t, b, 1)
		if n := count(t, b.db, "notes"); n != 1 {
			t.Fatalf("%d notes after failed batches, want 1", n)
		}
	})

	// A binary newer than its schema sends a kind no migration registered: the batch
	// fails without writing, with a code that is not a data error (the engine
	// retries it instead of refusing the command).
	t.Run("UnregisteredKind_FailsRetryably", func(t *testing.T) {
		t.Parallel()
		b := setupBatch(t)
		err := storage.CommitBatch(b.ctx, b.db, aggBatch(b, 1, rawRows{"future_kind", `[]`}))
		if code := pqCode(err); code != "PS003" {
			t.Fatalf("err = %v (SQLSTATE %q), want PS003", err, code)
		}
		wantOffset(t, b, 0)
		if n := count(t, b.db, "processed_commands"); n != 0 {
			t.Fatalf("%d processed commands written by a failed batch", n)
		}
	})

	// A kind is a name, never SQL: one that is not a plain lowercase identifier is
	// refused before anything is sent.
	t.Run("InvalidKind_RefusedBeforeSQL", func(t *testing.T) {
		t.Parallel()
		b := setupBatch(t)
		for _, k := range []string{"", "Invoice", "x(); DROP TABLE wallets; --", `invoice"`, "1x", "invoice\x00"} {
			err := storage.CommitBatch(b.ctx, b.db, aggBatch(b, 1, rawRows{k, `[]`}))
			if err == nil || pqCode(err) != "" {
				t.Fatalf("kind %q: err = %v, want a refusal before SQL", k, err)
			}
		}
		wantOffset(t, b, 0)
		if n := count(t, b.db, "wallets"); n != 0 {
			t.Fatalf("wallets = %d", n)
		}
	})

	t.Run("EmptyRows_Skipped", func(t *testing.T) {
		t.Parallel()
		b := setupBatch(t)
		if err := storage.CommitBatch(b.ctx, b.db, aggBatch(b, 1, storage.NewInvoiceWrites(), payoutstore.NewWrites())); err != nil {
			t.Fatal(err)
		}
		wantOffset(t, b, 1)
	})
}
