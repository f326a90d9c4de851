package storage_test

import (
	"testing"
	"time"

	"paysvc/storage"
)

func TestProcessingCollections(t *testing.T) {
	t.Parallel()
	b := setupBatch(t) // merchants M1, M2 (sandbox)
	mustExec(t, b.db, `INSERT INTO merchants (merchant_id, name, environment) VALUES ('L1', 'L1', 'live')`)
	inv := func(id, merchant, state, data, ref, age string) {
		mustExec(t, b.db, `INSERT INTO invoices (invoice_id, merchant_id, state, checkout_request_id, version, data, created_at, updated_at)
			VALUES ('`+id+`', '`+merchant+`', '`+state+`', `+ref+`, 1, '`+data+`', now(), now() - interval '`+age+`')`)
	}
	inv("I1", "M1", "PROCESSING", `{}`, "'ws_1'", "40 minutes")                       // counted, the oldest
	inv("I2", "M2", "PROCESSING", `{"outcome_unknown": true}`, "'ws_2'", "5 minutes") // counted: its reference can be queried
	inv("I3", "M1", "PROCESSING", `{"held": true}`, "'ws_3'", "2 hours")              // held: an operator's
	inv("I4", "M1", "PROCESSING", `{"outcome_unknown": true}`, "NULL", "3 hours")     // lost with no reference: an operator's
	inv("I5", "M1", "COMPLETE", `{}`, "'ws_5'", "5 hours")                            // final
	inv("I6", "L1", "PROCESSING", `{}`, "'ws_6'", "6 hours")                          // the other environment's
	p, err := storage.ProcessingCollections(b.ctx, b.db, "sandbox")
	if err != nil {
		t.Fatal(err)
	}
	if p.Invoices != 2 || p.Oldest < 40*time.Minute || p.Oldest > 41*time.Minute {
		t.Fatalf("%+v, want 2 invoices, the oldest 40 minutes", p)
	}
	mustExec(t, b.db, `UPDATE invoices SET state = 'FAILED' WHERE state = 'PROCESSING'`)
	if p, err = storage.ProcessingCollections(b.ctx, b.db, "sandbox"); err != nil || p != (storage.Processing{}) {
		t.Fatalf("%+v %v, want none", p, err)
	}
}
