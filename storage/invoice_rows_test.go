package storage_test

import (
	"encoding/json"
	"testing"
	"time"

	"paysvc/actors/aggregates/invoice"
	"paysvc/actors/aggregates/invoice/invoicestore"
	"paysvc/storage"
)

// The rows are encoded as each invoice is touched; a second touch replaces the
// invoice's row but keeps the version the batch started from and its place.
func TestInvoiceRowsEncodedAtTouch(t *testing.T) {
	w := storage.NewInvoiceWrites()
	if r, err := w.Rows(); err != nil || r != nil {
		t.Fatalf("no invoices: %s, %v", r, err)
	}
	invoicestore.Touch(w, invoice.State{}, inv("I1", 1, invoice.StatePending, t0))
	invoicestore.Touch(w, inv("I2", 4, invoice.StatePending, t0), inv("I2", 5, invoice.StateFailed, t0.Add(time.Second)))
	done := inv("I1", 2, invoice.StateComplete, t0.Add(2*time.Second))
	done.APIRef = `quote " and \ backslash`
	invoicestore.Touch(w, inv("I1", 1, invoice.StatePending, t0), done)
	raw, err := w.Rows()
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		InvoiceID string        `json:"invoice_id"`
		State     string        `json:"state"`
		APIRef    string        `json:"api_ref"`
		Version   int64         `json:"version"`
		Prev      int64         `json:"prev"`
		UpdatedAt time.Time     `json:"updated_at"`
		Data      invoice.State `json:"data"`
	}
	if err := json.Unmarshal(raw, &rows); err != nil {
		t.Fatalf("rows %s: %v", raw, err)
	}
	if len(rows) != 2 || rows[0].InvoiceID != "I1" || rows[1].InvoiceID != "I2" {
		t.Fatalf("rows %s", raw)
	}
	r := rows[0]
	if r.Prev != 0 || r.Version != 2 || r.State != invoice.StateComplete || r.APIRef != done.APIRef ||
		!r.UpdatedAt.Equal(done.UpdatedAt) || r.Data.Version != 2 || r.Data.APIRef != done.APIRef || !r.Data.Value.Equal(done.Value) {
		t.Fatalf("I1 row %+v", r)
	}
	if rows[1].Prev != 4 || rows[1].Version != 5 || rows[1].Data.State != invoice.StateFailed {
		t.Fatalf("I2 row %+v", rows[1])
	}
}

// An engine of the previous release, during a rolling deploy, still calls
// paysvc_commit_batch_v2 with its invoices as paysvc_apply_invoice's jsonb rows
// (migration 0039 made the _v2 functions wrappers of _v3): they are written, and a
// stale one still refuses the commit.
func TestCommitBatchV2StillTakesInvoiceRows(t *testing.T) {
	t.Parallel()
	b := setupBatch(t)
	call := func(next int64, cmd string, w *storage.InvoiceWrites) error {
		rows, err := w.Rows()
		if err != nil {
			t.Fatal(err)
		}
		e := `'{}'`
		empties := func(n int) string {
			out := e
			for range n - 1 {
				out += ", " + e
			}
			return out
		}
		_, err = b.db.ExecContext(b.ctx, `SELECT paysvc_commit_batch_v2($1, 0, $2, $3::bigint, $4, `+empties(11)+`, `+empties(8)+`, `+empties(10)+`,
			ARRAY[$5::text], '{M1}', '{invoice.provider_result}', ARRAY[$6::bigint], '{"{}"}', `+empties(5)+`,
			'{invoice}', ARRAY[$7::jsonb])`, testTopic, b.epoch, next, t0, cmd, next-1, string(rows))
		return err
	}
	w := storage.NewInvoiceWrites()
	invoicestore.Touch(w, invoice.State{}, inv("I1", 1, invoice.StatePending, t0))
	if err := call(1, "C1", w); err != nil {
		t.Fatal(err)
	}
	w = storage.NewInvoiceWrites()
	invoicestore.Touch(w, inv("I1", 1, invoice.StatePending, t0), inv("I1", 2, invoice.StateComplete, t0.Add(time.Second)))
	if err := call(2, "C2", w); err != nil {
		t.Fatal(err)
	}
	if got, err := invoicestore.Get(b.ctx, b.db, "M1", "I1"); err != nil || got.Version != 2 || got.State != invoice.StateComplete {
		t.Fatalf("I1 = %+v, %v", got, err)
	}
	w = storage.NewInvoiceWrites()
	invoicestore.Touch(w, inv("I1", 1, invoice.StatePending, t0), inv("I1", 2, invoice.StateFailed, t0))
	if err := call(3, "C3", w); pqCode(err) != "PS002" {
		t.Fatalf("stale invoice through _v2: %v, want PS002", err)
	}
	wantOffset(t, b, 2)
}
