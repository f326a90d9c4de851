package api_test

import (
	"context"
	"fmt"
	"testing"

	"paysvc/storage"
)

// A list's count and its page are read in one snapshot: while another connection
// keeps adding the merchant's customers, every page that holds the whole list
// shows exactly as many results as its count says. Read in two statements, a
// customer added between them was shown and not counted (or counted and not
// shown), and a client paging by the count skipped or repeated one.
func TestListCountAgreesWithPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const writes = 300
	stop := make(chan struct{})
	wrote := make(chan error, 1)
	go func() {
		defer close(wrote)
		for n := range writes {
			select {
			case <-stop:
				return
			default:
			}
			email := fmt.Sprintf("payer%04d@example.com", n)
			if _, _, err := storage.UpsertCustomer(ctx, b.env.Schema.DB, storage.CustomerUpsert{MerchantID: b.merchant, Email: email,
				NewID: fmt.Sprintf("CUS%04d", n), Fields: map[string]*string{}}); err != nil {
				wrote <- err
				return
			}
		}
	}()
	defer close(stop)
	var list struct {
		Count   int              `json:"count"`
		Results []map[string]any `json:"results"`
	}
	for i := range 150 {
		r := b.get(fmt.Sprintf("/api/v1/subscriptions/customers/?page_size=%d", writes+1))
		if r.Status != 200 {
			t.Fatalf("list customers: %d %s", r.Status, r.Body)
		}
		r.JSON(t, &list)
		if len(list.Results) != list.Count {
			t.Fatalf("read %d: count %d beside a page of %d (every customer fits the page)", i, list.Count, len(list.Results))
		}
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if list.Count == 0 {
		t.Fatal("no customer was ever listed: the writer did not run beside the reads")
	}
}
