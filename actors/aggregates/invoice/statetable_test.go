package invoice

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"paysvc/actors/aggregates/statedoc"
	"paysvc/actors/values/money"
)

// row is one line of the table in docs/state-machines.md, "Invoice (collections)",
// "Every command in every state": what each principal's command does to an
// invoice in each state, and what the engine then moves in money.
type row struct{ state, command, principal, result, money string }

// sentResult is the one result that depends on a detail of the state rather than
// its status and flags: SENT records the rail's reference only when the invoice has
// none yet. The loop tries SENT on both variants of every state.
const sentResult = "reference recorded if none, else ignored: no change"

// invoiceTable is the table of docs/state-machines.md, "Invoice (collections)",
// "Every command in every state", read from the document itself: the test holds
// the code to the documented words, row by row, with no second copy of the table
// to drift from either. Money: "credit: available" and "credit: uncleared" are
// the engine's wallet.Collect of net_amount (value from the provider's clearing
// account, charges to fees), uncleared for a card until invoice.clear; "release:
// uncleared -> available" is clearInvoice's release of net_amount.
func invoiceTable(t *testing.T) []row {
	t.Helper()
	doc := statedoc.Table(t, "## Invoice (collections)", "| State | Command | Principal | Result | Money |")
	rows := make([]row, len(doc))
	for i, cells := range doc {
		if len(cells) != 5 {
			t.Fatalf("docs/state-machines.md, invoice row %d: %d cells, want 5: %q", i+1, len(cells), cells)
		}
		rows[i] = row{cells[0], cells[1], cells[2], cells[3], cells[4]}
	}
	return rows
}

var tableAt = time.Unix(3, 0)

// invoiceStates builds each state of the table with real commands from an
// invoice of value 100.00 (created), so every state is one the code can reach.
func invoiceStates() []struct {
	label string
	build func(*testing.T) State
} {
	then := func(cmd any) func(*testing.T) State {
		return func(t *testing.T) State {
			t.Helper()
			s, err := Apply(created(t), cmd)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}
	short := money.MustParse("10.00")
	return []struct {
		label string
		build func(*testing.T) State
	}{
		{"none", func(*testing.T) State { return State{} }},
		{"PENDING", created},
		{"PROCESSING", then(Accept{CheckoutRequestID: "ws_1", At: tableAt})},
		{"PROCESSING outcome_unknown", then(Unknown{Reason: "timeout after send", At: tableAt})},
		{"PROCESSING held", then(Settle{Receipt: "RKT9", CheckoutRequestID: "ws_1", Paid: &short, Cleared: true, At: tableAt})},
		{"COMPLETE cleared", then(Settle{Receipt: "RKT1", CheckoutRequestID: "ws_1", Cleared: true, At: tableAt})},
		{"COMPLETE uncleared", then(Settle{Receipt: "CARD1", At: tableAt})},
		{"FAILED", then(Fail{Code: "1032", Reason: "Request cancelled by user", At: tableAt})},
	}
}

// invoiceCommands are the pure commands the engine makes of each principal's
// command (actors/aggregates/invoice/invoicekind): invoice.stk_push -> Create;
// invoice.provider_result by stage: SENT -> Sent, UNKNOWN -> Unknown, ACCEPTED ->
// Accept, otherwise code 0 -> Settle (Cleared unless the invoice is a card's, Paid
// = paid_amount) and any other code -> Fail; invoice.clear -> Clear. Where the
// principal changes the command (a card rail's success is uncleared), it is a
// command of its own. The sandbox simulator and the live Daraja adapter (its
// callbacks and status query) send the same commands: one row covers both.
func invoiceCommands() []struct {
	name, principal string
	cmd             any
} {
	value, other := money.MustParse("100.00"), money.MustParse("10.00")
	return []struct {
		name, principal string
		cmd             any
	}{
		{"create", "merchant", Create{InvoiceID: "INV1", MerchantID: "M", WalletID: "W", Provider: "M-PESA", Currency: "KES",
			Tariff: "BUSINESS-PAYS", Value: value, Charges: money.MustParse("1.50"), NetAmount: money.MustParse("98.50"),
			Account: "254700000000", APIRef: "ref", At: tableAt}},
		{"SENT", "rail", Sent{CheckoutRequestID: "ws_new", At: tableAt}},
		{"ACCEPTED", "rail", Accept{CheckoutRequestID: "ws_new", At: tableAt}},
		{"UNKNOWN", "rail", Unknown{Reason: "unreadable answer", At: tableAt}},
		{"FINAL success, paid = value", "rail", Settle{Receipt: "RKT2", CheckoutRequestID: "ws_new", Paid: &value, Cleared: true, At: tableAt}},
		{"FINAL success, no paid amount", "rail", Settle{Receipt: "RKT2", CheckoutRequestID: "ws_new", Cleared: true, At: tableAt}},
		{"FINAL success, card", "card rail", Settle{Receipt: "CARD2", At: tableAt}},
		{"FINAL success, paid != value", "rail", Settle{Receipt: "RKT3", CheckoutRequestID: "ws_new", Paid: &other, Cleared: true, At: tableAt}},
		{"FINAL failure", "rail", Fail{Code: "1", Reason: "The balance is insufficient for the transaction.", At: tableAt}},
		{"clear", "card clearing", Clear{At: tableAt}},
	}
}

// label names a state as the table does: its status and the flags inside it.
func label(s State) string {
	switch {
	case !s.Exists():
		return "none"
	case s.State == StateProcessing && s.Held:
		return "PROCESSING held"
	case s.State == StateProcessing && s.OutcomeUnknown:
		return "PROCESSING outcome_unknown"
	case s.State == StateComplete && s.Cleared:
		return "COMPLETE cleared"
	case s.State == StateComplete:
		return "COMPLETE uncleared"
	}
	return s.State
}

// outcome applies cmd and says what happened in the table's words. The money is
// what the engine moves for that outcome (actors/aggregates/invoice/invoicekind): providerResult
// credits the wallet only when the invoice became COMPLETE by this command, and
// clearInvoice releases only when Clear was applied; a refused or ignored command
// moves nothing (the engine answers ErrDuplicate and ErrHeld with an ack, anything
// else with a refusal).
func outcome(t *testing.T, s State, cmd any) (result, moved string) {
	t.Helper()
	n, err := Apply(s, cmd)
	if err != nil {
		if !reflect.DeepEqual(n, s) {
			t.Fatalf("%T refused (%v) but changed the state:\n%+v\n%+v", cmd, err, s, n)
		}
		var te TransitionError
		switch {
		case errors.Is(err, ErrDuplicate):
			return "ignored: no change", "nothing"
		case errors.Is(err, ErrHeld):
			return "ignored: held for review", "nothing"
		case errors.Is(err, ErrNotFound):
			return "refused: not found", "nothing"
		case errors.Is(err, ErrExists):
			return "refused: already exists", "nothing"
		case errors.As(err, &te):
			return "refused: " + te.From + " -> " + te.To, "nothing"
		}
		return "refused: " + err.Error(), "nothing"
	}
	if s.Exists() && n.Version != s.Version+1 {
		t.Fatalf("%T applied: version %d -> %d", cmd, s.Version, n.Version)
	}
	result, moved = label(n), "nothing"
	if _, sent := cmd.(Sent); sent {
		if label(n) != label(s) || n.CheckoutRequestID == s.CheckoutRequestID {
			t.Fatalf("SENT changed %s to %s (reference %q -> %q)", label(s), label(n), s.CheckoutRequestID, n.CheckoutRequestID)
		}
		result = "reference recorded"
	}
	switch cmd.(type) {
	case Settle:
		if s.State != n.State && n.State == StateComplete {
			moved = "credit: available"
			if !n.Cleared {
				moved = "credit: uncleared"
			}
		}
	case Clear:
		moved = "release: uncleared -> available"
	}
	return result, moved
}

// Every state x every command, against the table: a pair without a row fails, as
// does a row no pair used.
func TestInvoiceTable_EveryStateEveryCommand(t *testing.T) {
	t.Parallel()
	table := invoiceTable(t)
	if len(table) != 80 {
		t.Errorf("docs/state-machines.md has %d invoice rows, want 8 states x 10 commands", len(table))
	}
	rows := map[[2]string]row{}
	for _, r := range table {
		k := [2]string{r.state, r.command}
		if _, dup := rows[k]; dup {
			t.Fatalf("two rows for (%s, %s)", r.state, r.command)
		}
		rows[k] = r
	}
	used := map[[2]string]bool{}
	for _, st := range invoiceStates() {
		for _, c := range invoiceCommands() {
			k := [2]string{st.label, c.name}
			r, ok := rows[k]
			if !ok {
				t.Errorf("(%s, %s): no row in the table", st.label, c.name)
				continue
			}
			used[k] = true
			if r.principal != c.principal {
				t.Errorf("(%s, %s): principal %q, the command is %q's", st.label, c.name, r.principal, c.principal)
			}
			s := st.build(t)
			if label(s) != st.label {
				t.Fatalf("%s: built %s", st.label, label(s))
			}
			if r.result != sentResult {
				if res, m := outcome(t, s, c.cmd); res != r.result || m != r.money {
					t.Errorf("(%s, %s): got %q / %q, table says %q / %q", st.label, c.name, res, m, r.result, r.money)
				}
				continue
			}
			// SENT: the same row for an invoice without the rail's reference and
			// for one that has it.
			without, with := s, s
			without.CheckoutRequestID, with.CheckoutRequestID = "", "ws_old"
			if res, m := outcome(t, without, c.cmd); res != "reference recorded" || m != r.money {
				t.Errorf("(%s without reference, %s): got %q / %q", st.label, c.name, res, m)
			}
			if res, m := outcome(t, with, c.cmd); res != "ignored: no change" || m != r.money {
				t.Errorf("(%s with reference, %s): got %q / %q", st.label, c.name, res, m)
			}
		}
	}
	for _, r := range table {
		if !used[[2]string{r.state, r.command}] {
			t.Errorf("row (%s, %s) names a state or command the test does not build", r.state, r.command)
		}
	}
}
