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

// invoiceTable mirrors the documented table line for line (same order, same words:
// TestInvoiceTable_MatchesDoc compares them), so a reader can check one against
// the other. Money: "credit: available" and "credit: uncleared" are the engine's
// wallet.Collect of net_amount (value from the provider's clearing account, charges
// to fees), uncleared for a card until invoice.clear; "release: uncleared ->
// available" is clearInvoice's wallet.Release of net_amount.
var invoiceTable = []row{
	{"none", "create", "merchant", "PENDING", "nothing"},
	{"none", "SENT", "rail", "refused: not found", "nothing"},
	{"none", "ACCEPTED", "rail", "refused: not found", "nothing"},
	{"none", "UNKNOWN", "rail", "refused: not found", "nothing"},
	{"none", "FINAL success, paid = value", "rail", "refused: not found", "nothing"},
	{"none", "FINAL success, no paid amount", "rail", "refused: not found", "nothing"},
	{"none", "FINAL success, card", "card rail", "refused: not found", "nothing"},
	{"none", "FINAL success, paid != value", "rail", "refused: not found", "nothing"},
	{"none", "FINAL failure", "rail", "refused: not found", "nothing"},
	{"none", "clear", "card clearing", "refused: not found", "nothing"},

	{"PENDING", "create", "merchant", "refused: already exists", "nothing"},
	{"PENDING", "SENT", "rail", sentResult, "nothing"},
	{"PENDING", "ACCEPTED", "rail", "PROCESSING", "nothing"},
	{"PENDING", "UNKNOWN", "rail", "PROCESSING outcome_unknown", "nothing"},
	{"PENDING", "FINAL success, paid = value", "rail", "COMPLETE cleared", "credit: available"},
	{"PENDING", "FINAL success, no paid amount", "rail", "COMPLETE cleared", "credit: available"},
	{"PENDING", "FINAL success, card", "card rail", "COMPLETE uncleared", "credit: uncleared"},
	{"PENDING", "FINAL success, paid != value", "rail", "PROCESSING held", "nothing"},
	{"PENDING", "FINAL failure", "rail", "FAILED", "nothing"},
	{"PENDING", "clear", "card clearing", "ignored: no change", "nothing"},

	{"PROCESSING", "create", "merchant", "refused: already exists", "nothing"},
	{"PROCESSING", "SENT", "rail", sentResult, "nothing"},
	{"PROCESSING", "ACCEPTED", "rail", "ignored: no change", "nothing"},
	{"PROCESSING", "UNKNOWN", "rail", "ignored: no change", "nothing"},
	{"PROCESSING", "FINAL success, paid = value", "rail", "COMPLETE cleared", "credit: available"},
	{"PROCESSING", "FINAL success, no paid amount", "rail", "COMPLETE cleared", "credit: available"},
	{"PROCESSING", "FINAL success, card", "card rail", "COMPLETE uncleared", "credit: uncleared"},
	{"PROCESSING", "FINAL success, paid != value", "rail", "PROCESSING held", "nothing"},
	{"PROCESSING", "FINAL failure", "rail", "FAILED", "nothing"},
	{"PROCESSING", "clear", "card clearing", "ignored: no change", "nothing"},

	{"PROCESSING outcome_unknown", "create", "merchant", "refused: already exists", "nothing"},
	{"PROCESSING outcome_unknown", "SENT", "rail", sentResult, "nothing"},
	{"PROCESSING outcome_unknown", "ACCEPTED", "rail", "ignored: no change", "nothing"},
	{"PROCESSING outcome_unknown", "UNKNOWN", "rail", "ignored: no change", "nothing"},
	{"PROCESSING outcome_unknown", "FINAL success, paid = value", "rail", "COMPLETE cleared", "credit: available"},
	{"PROCESSING outcome_unknown", "FINAL success, no paid amount", "rail", "COMPLETE cleared", "credit: available"},
	{"PROCESSING outcome_unknown", "FINAL success, card", "card rail", "COMPLETE uncleared", "credit: uncleared"},
	{"PROCESSING outcome_unknown", "FINAL success, paid != value", "rail", "PROCESSING held", "nothing"},
	{"PROCESSING outcome_unknown", "FINAL failure", "rail", "FAILED", "nothing"},
	{"PROCESSING outcome_unknown", "clear", "card clearing", "ignored: no change", "nothing"},

	{"PROCESSING held", "create", "merchant", "refused: already exists", "nothing"},
	{"PROCESSING held", "SENT", "rail", sentResult, "nothing"},
	{"PROCESSING held", "ACCEPTED", "rail", "ignored: no change", "nothing"},
	{"PROCESSING held", "UNKNOWN", "rail", "ignored: held for review", "nothing"},
	{"PROCESSING held", "FINAL success, paid = value", "rail", "ignored: held for review", "nothing"},
	{"PROCESSING held", "FINAL success, no paid amount", "rail", "ignored: held for review", "nothing"},
	{"PROCESSING held", "FINAL success, card", "card rail", "ignored: held for review", "nothing"},
	{"PROCESSING held", "FINAL success, paid != value", "rail", "ignored: held for review", "nothing"},
	{"PROCESSING held", "FINAL failure", "rail", "ignored: held for review", "nothing"},
	{"PROCESSING held", "clear", "card clearing", "ignored: no change", "nothing"},

	{"COMPLETE cleared", "create", "merchant", "refused: already exists", "nothing"},
	{"COMPLETE cleared", "SENT", "rail", sentResult, "nothing"},
	{"COMPLETE cleared", "ACCEPTED", "rail", "ignored: no change", "nothing"},
	{"COMPLETE cleared", "UNKNOWN", "rail", "ignored: no change", "nothing"},
	{"COMPLETE cleared", "FINAL success, paid = value", "rail", "ignored: no change", "nothing"},
	{"COMPLETE cleared", "FINAL success, no paid amount", "rail", "ignored: no change", "nothing"},
	{"COMPLETE cleared", "FINAL success, card", "card rail", "ignored: no change", "nothing"},
	{"COMPLETE cleared", "FINAL success, paid != value", "rail", "ignored: no change", "nothing"},
	{"COMPLETE cleared", "FINAL failure", "rail", "refused: COMPLETE -> FAILED", "nothing"},
	{"COMPLETE cleared", "clear", "card clearing", "ignored: no change", "nothing"},

	{"COMPLETE uncleared", "create", "merchant", "refused: already exists", "nothing"},
	{"COMPLETE uncleared", "SENT", "rail", sentResult, "nothing"},
	{"COMPLETE uncleared", "ACCEPTED", "rail", "ignored: no change", "nothing"},
	{"COMPLETE uncleared", "UNKNOWN", "rail", "ignored: no change", "nothing"},
	{"COMPLETE uncleared", "FINAL success, paid = value", "rail", "ignored: no change", "nothing"},
	{"COMPLETE uncleared", "FINAL success, no paid amount", "rail", "ignored: no change", "nothing"},
	{"COMPLETE uncleared", "FINAL success, card", "card rail", "ignored: no change", "nothing"},
	{"COMPLETE uncleared", "FINAL success, paid != value", "rail", "ignored: no change", "nothing"},
	{"COMPLETE uncleared", "FINAL failure", "rail", "refused: COMPLETE -> FAILED", "nothing"},
	{"COMPLETE uncleared", "clear", "card clearing", "COMPLETE cleared", "release: uncleared -> available"},

	{"FAILED", "create", "merchant", "refused: already exists", "nothing"},
	{"FAILED", "SENT", "rail", sentResult, "nothing"},
	{"FAILED", "ACCEPTED", "rail", "ignored: no change", "nothing"},
	{"FAILED", "UNKNOWN", "rail", "ignored: no change", "nothing"},
	{"FAILED", "FINAL success, paid = value", "rail", "refused: FAILED -> COMPLETE", "nothing"},
	{"FAILED", "FINAL success, no paid amount", "rail", "refused: FAILED -> COMPLETE", "nothing"},
	{"FAILED", "FINAL success, card", "card rail", "refused: FAILED -> COMPLETE", "nothing"},
	{"FAILED", "FINAL success, paid != value", "rail", "refused: FAILED -> COMPLETE", "nothing"},
	{"FAILED", "FINAL failure", "rail", "ignored: no change", "nothing"},
	{"FAILED", "clear", "card clearing", "ignored: no change", "nothing"},
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
	rows := map[[2]string]row{}
	for _, r := range invoiceTable {
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
	for _, r := range invoiceTable {
		if !used[[2]string{r.state, r.command}] {
			t.Errorf("row (%s, %s) names a state or command the test does not build", r.state, r.command)
		}
	}
}

// The table above is the documented one, word for word.
func TestInvoiceTable_MatchesDoc(t *testing.T) {
	t.Parallel()
	doc := statedoc.Table(t, "## Invoice (collections)", "| State | Command | Principal | Result | Money |")
	if len(doc) != len(invoiceTable) {
		t.Errorf("docs/state-machines.md has %d rows, the test %d", len(doc), len(invoiceTable))
	}
	for i := 0; i < len(doc) && i < len(invoiceTable); i++ {
		r := invoiceTable[i]
		if want := []string{r.state, r.command, r.principal, r.result, r.money}; !reflect.DeepEqual(doc[i], want) {
			t.Errorf("row %d: doc %q, test %q", i+1, doc[i], want)
		}
	}
}
