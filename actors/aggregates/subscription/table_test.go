package subscription

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// The (state, command, principal) table of docs/state-machines.md, "Subscription:
// who may cause each transition": every command is given by one principal; a cell
// is the status Apply leaves, "no change" (a repeated or overtaken command,
// answered with the current state) or "refused". Any other principal is refused
// in every state.

// tableStates are the table's columns: each a state reached through Apply.
var tableStates = []struct {
	name  string
	build func(t *testing.T) State
}{
	{"(none)", func(*testing.T) State { return State{} }},
	{"PENDING", func(t *testing.T) State { return created(t, "2025-01-31", monthly(3)) }},
	{"ACTIVE", tableActive},
	{"ACTIVE, charge in flight", func(t *testing.T) State {
		s := tableActive(t)
		return mustApply(t, s, StartCycle{Slot: s.Slot, Date: s.NextDate, Generation: s.Generation, Today: s.NextDate, InvoiceID: "INV-OPEN", At: t0})
	}},
	{"FAILED", func(t *testing.T) State { return tableDeclines(t, 1) }},
	{"FAILED, last retry", func(t *testing.T) State { return tableDeclines(t, MaxFailedCharges-1) }},
	{"COMPLETE", func(t *testing.T) State {
		s := tableActive(t)
		s = tableCharge(t, s, true)
		return tableCharge(t, s, true)
	}},
	{"CANCELED", func(t *testing.T) State { return mustApply(t, tableActive(t), Unsubscribe{At: t0}) }},
}

// tableActive: ACTIVE with its first cycle (2025-01-31) charged; next 2025-02-28.
func tableActive(t *testing.T) State {
	s := mustApply(t, created(t, "2025-01-31", monthly(3)), Activate{CardToken: "tok", CardNetwork: "VISA",
		CardNumber: "424242******4242", CardOutcome: CardApproves, At: t0})
	return tableCharge(t, s, true)
}

// tableDeclines: tableActive, then n declined cycles in a row.
func tableDeclines(t *testing.T, n int) State {
	s := tableActive(t)
	for range n {
		s = tableCharge(t, s, false)
	}
	return s
}

func tableCharge(t *testing.T, s State, approved bool) State {
	t.Helper()
	return mustApply(t, s, ChargeCycle{Slot: s.Slot, Date: s.NextDate, Generation: s.Generation, Today: s.NextDate,
		InvoiceID: "INV" + s.NextDate, Approved: approved, Reason: "Declined", At: t0})
}

// due is the date of the state's due cycle (a date after every fixture's when it has none).
func due(s State) string {
	if s.NextDate == "" {
		return "2025-09-30"
	}
	return s.NextDate
}

func attemptInvoice(s State) string {
	if s.Attempt == nil {
		return "INV-NONE"
	}
	return s.Attempt.InvoiceID
}

func lastCharge(s State) string {
	if s.LastChargeDate == "" {
		return s.StartDate
	}
	return s.LastChargeDate
}

// tableCommands are the table's rows, with the principal that gives each and the
// cell of each state, in tableStates' order.
var tableCommands = []struct {
	name  string
	by    Principal
	build func(s State) any
	want  []string
}{
	{"create", ByMerchant, func(State) any {
		return Create{SubscriptionID: "S1", MerchantID: "M1", CustomerID: "C1", Plan: monthly(3), StartDate: "2025-01-31", At: t0}
	}, []string{"PENDING", "refused", "refused", "refused", "refused", "refused", "refused", "refused"}},
	{"activate (card set up, known outcome)", ByCustomer, func(State) any {
		return Activate{CardToken: "tok-new", CardNetwork: "VISA", CardNumber: "400000******3220", CardOutcome: CardApproves, At: t0}
	}, []string{"refused", "ACTIVE", "refused", "refused", "ACTIVE", "ACTIVE", "refused", "refused"}},
	{"activate (absent or unknown outcome)", ByCustomer, func(State) any {
		return Activate{CardToken: "tok-new", CardNetwork: "VISA", CardNumber: "400000******3220", At: t0}
	}, []string{"refused", "refused", "refused", "refused", "refused", "refused", "refused", "refused"}},
	{"charge the due cycle: approved", ByScheduler, func(s State) any {
		return ChargeCycle{Slot: s.Slot, Date: due(s), Generation: s.Generation, Today: due(s), InvoiceID: "INV-A", Approved: true, At: t0}
	}, []string{"refused", "no change", "ACTIVE", "no change", "ACTIVE", "ACTIVE", "no change", "no change"}},
	{"charge the due cycle: declined", ByScheduler, func(s State) any {
		return ChargeCycle{Slot: s.Slot, Date: due(s), Generation: s.Generation, Today: due(s), InvoiceID: "INV-D", Reason: "Declined", At: t0}
	}, []string{"refused", "no change", "FAILED", "no change", "FAILED", "CANCELED", "no change", "no change"}},
	{"open the due cycle's charge (two-step rail)", ByScheduler, func(s State) any {
		return StartCycle{Slot: s.Slot, Date: due(s), Generation: s.Generation, Today: due(s), InvoiceID: "INV-S", At: t0}
	}, []string{"refused", "no change", "ACTIVE", "no change", "FAILED", "FAILED", "no change", "no change"}},
	{"the rail approves the open charge", ByScheduler, func(s State) any {
		return CycleCharged{InvoiceID: attemptInvoice(s), At: t0}
	}, []string{"refused", "no change", "no change", "ACTIVE", "no change", "no change", "no change", "no change"}},
	{"the rail declines the open charge", ByScheduler, func(s State) any {
		return CycleFailed{InvoiceID: attemptInvoice(s), Reason: "Declined", At: t0}
	}, []string{"refused", "no change", "no change", "FAILED", "no change", "no change", "no change", "no change"}},
	{"unsubscribe", ByMerchant, func(State) any { return Unsubscribe{At: t0} },
		[]string{"refused", "CANCELED", "CANCELED", "CANCELED", "CANCELED", "CANCELED", "refused", "no change"}},
	{"change plan", ByMerchant, func(State) any {
		return ChangePlan{Plan: Plan{PlanID: "P2", Frequency: 1, FrequencyUnit: UnitWeek, BillingCycles: 12}, At: t0}
	}, []string{"refused", "PENDING", "ACTIVE", "ACTIVE", "FAILED", "FAILED", "refused", "refused"}},
	{"set next_date (a later date)", ByMerchant, func(State) any {
		return SetNextDate{Date: "2025-12-01", Today: "2025-06-01", At: t0}
	}, []string{"refused", "PENDING", "ACTIVE", "refused", "FAILED", "FAILED", "refused", "refused"}},
	{"set next_date to the last charge's date", ByMerchant, func(s State) any {
		return SetNextDate{Date: lastCharge(s), Today: lastCharge(s), At: t0}
	}, []string{"refused", "no change", "refused", "refused", "refused", "refused", "refused", "refused"}},
}

func outcome(n State, err error) string {
	switch {
	case err == nil:
		return n.Status
	case errors.Is(err, ErrDuplicate), errors.Is(err, ErrStale):
		return "no change"
	}
	return "refused"
}

// Every (state, command, principal) triple through the subscription's Step (ApplyBy),
// compared with the table; a message that is not Given is refused.
func TestEveryStateCommandPrincipal(t *testing.T) {
	if _, _, err := Step(State{}, Unsubscribe{At: t0}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a command without its principal: %v", err)
	}
	for _, c := range tableCommands {
		if len(c.want) != len(tableStates) {
			t.Fatalf("%s: %d cells for %d states", c.name, len(c.want), len(tableStates))
		}
	}
	for i, st := range tableStates {
		for _, c := range tableCommands {
			for _, by := range Principals {
				s := st.build(t)
				cmd := c.build(s)
				if IssuerOf(cmd) != c.by {
					t.Fatalf("%s: issued by %q, the table says %q", c.name, IssuerOf(cmd), c.by)
				}
				want := "refused"
				if by == c.by {
					want = c.want[i]
				}
				n, out, err := Step(s, Given{By: by, Cmd: cmd})
				if out != nil {
					t.Errorf("%s / %s / %s: the step said %v", st.name, c.name, by, out)
				}
				if got := outcome(n, err); got != want {
					t.Errorf("%s / %s / %s: %s (%v), want %s", st.name, c.name, by, got, err, want)
				}
				if err != nil && n.Version != s.Version {
					t.Errorf("%s / %s / %s: refused but the state moved", st.name, c.name, by)
				}
			}
		}
	}
}

// renderTable is the table as docs/state-machines.md shows it.
func renderTable() string {
	var b strings.Builder
	b.WriteString("| command | given by |")
	for _, st := range tableStates {
		b.WriteString(" " + st.name + " |")
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(tableStates)) + "\n")
	for _, c := range tableCommands {
		b.WriteString("| " + c.name + " | " + string(c.by) + " |")
		for _, w := range c.want {
			b.WriteString(" " + w + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// The documented table is this test's table, word for word.
func TestDocumentedTableIsTheTested(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/state-machines.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := renderTable(); !strings.Contains(string(doc), want) {
		t.Fatalf("docs/state-machines.md does not hold the tested table; it should read:\n%s", want)
	}
}
