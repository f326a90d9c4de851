package storage_test

import (
	"encoding/json"
	"testing"
	"time"

	"paysvc/actors/invoice"
	"paysvc/storage"
)

// The rows are encoded as each invoice is touched; a second touch replaces the
// invoice's row but keeps the version the batch started from and its place.
func TestInvoiceRowsEncodedAtTouch(t *testing.T) {
	w := storage.NewInvoiceWrites()
	if r, err := w.Rows(); err != nil || r != nil {
		t.Fatalf("no invoices: %s, %v", r, err)
	}
	w.Touch(invoice.State{}, inv("I1", 1, invoice.StatePending, t0))
	w.Touch(inv("I2", 4, invoice.StatePending, t0), inv("I2", 5, invoice.StateFailed, t0.Add(time.Second)))
	done := inv("I1", 2, invoice.StateComplete, t0.Add(2*time.Second))
	done.APIRef = `quote " and \ backslash`
	w.Touch(inv("I1", 1, invoice.StatePending, t0), done)
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
