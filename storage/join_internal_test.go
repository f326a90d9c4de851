package storage

import (
	"encoding/json"
	"testing"
)

type rows struct{ kind, json string }

func (r rows) Kind() string                   { return r.kind }
func (r rows) Rows() (json.RawMessage, error) { return json.RawMessage(r.json), nil }

type joinable struct{ rows }

func (joinable) Joinable() {}

// A joinable kind's arrays become one call at its first place, empty ones left
// out; other kinds keep their calls and their order.
func TestJoinAggregates(t *testing.T) {
	in := []AggregateRows{
		joinable{rows{kind: "invoice", json: `[{"invoice_id":"a"}]`}},
		rows{kind: "payout", json: `{"files":[]}`},
		joinable{rows{kind: "invoice", json: ` [ ] `}},
		rows{kind: "payout", json: `{"files":[1]}`},
		joinable{rows{kind: "invoice", json: `[{"invoice_id":"b"},{"invoice_id":"c"}]`}},
	}
	out := joinAggregates(in)
	if len(out) != 3 {
		t.Fatalf("%d calls, want 3 (one invoice, two payout)", len(out))
	}
	kinds := []string{out[0].Kind(), out[1].Kind(), out[2].Kind()}
	if kinds[0] != "invoice" || kinds[1] != "payout" || kinds[2] != "payout" {
		t.Fatalf("kinds %v", kinds)
	}
	got, err := out[0].Rows()
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"invoice_id":"a"},{"invoice_id":"b"},{"invoice_id":"c"}]`; string(got) != want {
		t.Fatalf("joined rows %s, want %s", got, want)
	}
	var v []map[string]string
	if err := json.Unmarshal(got, &v); err != nil || len(v) != 3 {
		t.Fatalf("joined rows are not a 3-element array: %v", err)
	}
	if p, _ := out[2].Rows(); string(p) != `{"files":[1]}` {
		t.Fatalf("second payout call %s", p)
	}

	// Nothing to write at all: no rows, as an empty collector says.
	empty := joinAggregates([]AggregateRows{joinable{rows{kind: "invoice", json: `[]`}}, joinable{rows{kind: "invoice"}}})
	if r, err := empty[0].Rows(); err != nil || r != nil {
		t.Fatalf("empty join = %s, %v; want nil", r, err)
	}
	// A joinable kind whose rows are not an array is an error, not a bad call.
	bad := joinAggregates([]AggregateRows{joinable{rows{kind: "invoice", json: `{"x":1}`}}})
	if _, err := bad[0].Rows(); err == nil {
		t.Fatal("an object accepted as a joinable kind's rows")
	}
}
