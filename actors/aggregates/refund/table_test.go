package refund

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"paysvc/actors/values/money"
)

// documented mirrors the table of docs/state-machines.md ("Refund (chargeback)"):
// per state, per command, the one principal that may send it there and the result
// ("principal: state[, money]"); "—" is refused for everyone. TestRefundTable
// checks this mirror against the doc itself and against the code, triple by triple.
var documented = map[string]map[string]string{
	"(none)": {
		"refund.create": "merchant: PENDING, hold",
	},
	"PENDING": {
		"refund.cancel":    "merchant: CANCELLED, release",
		"refund.take":      "rail: PENDING (taken)",
		"settle COMPLETED": "rail: COMPLETED, debit",
		"settle CANCELLED": "rail: CANCELLED, release",
		"settle DISPUTED":  "rail: DISPUTED",
		"settle OVERDUE":   "rail: OVERDUE",
	},
	"PENDING (taken)": {
		"refund.take":      "rail: PENDING (taken)",
		"settle COMPLETED": "rail: COMPLETED, debit",
		"settle CANCELLED": "rail: CANCELLED, release",
		"settle DISPUTED":  "rail: DISPUTED",
		"settle OVERDUE":   "rail: OVERDUE",
	},
	"DISPUTED": {
		"refund.take":      "rail: DISPUTED",
		"settle COMPLETED": "rail: COMPLETED, debit",
		"settle CANCELLED": "rail: CANCELLED, release",
	},
	"OVERDUE": {
		"refund.take":      "rail: OVERDUE",
		"settle COMPLETED": "rail: COMPLETED, debit",
		"settle CANCELLED": "rail: CANCELLED, release",
	},
	"COMPLETED": {},
	"CANCELLED": {},
}

// The doc's names of the table's states and commands.
var stateNames = map[string]string{StateNone: "(none)", StatusPending: "PENDING", StateTaken: "PENDING (taken)",
	StatusDisputed: "DISPUTED", StatusOverdue: "OVERDUE", StatusCompleted: "COMPLETED", StatusCancelled: "CANCELLED"}

type command struct{ typ, report string }

func (c command) name() string {
	if c.typ == CmdSettle {
		return "settle " + c.report
	}
	return c.typ
}

// Every command the table knows, with every status refund.settle could report
// (PENDING included: it is refused everywhere).
var commands = func() []command {
	cs := []command{{CmdCreate, ""}, {CmdCancel, ""}, {CmdTake, ""}}
	for _, s := range Statuses {
		cs = append(cs, command{CmdSettle, s})
	}
	return cs
}()

var principals = []string{ByMerchant, ByRail, ByNobody}

// The doc's table, read from docs/state-machines.md: cells by state and command.
func docTable(t *testing.T) map[string]map[string]string {
	t.Helper()
	raw, err := os.ReadFile("../../../docs/state-machines.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := string(raw)
	i := strings.Index(sec, "## Refund (chargeback)")
	if i < 0 {
		t.Fatal("docs/state-machines.md has no Refund section")
	}
	sec = sec[i:]
	if j := strings.Index(sec[3:], "\n## "); j >= 0 {
		sec = sec[:j+3]
	}
	out := map[string]map[string]string{}
	var head []string
	for _, line := range strings.Split(sec, "\n") {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for k := range cells {
			cells[k] = strings.Trim(strings.TrimSpace(cells[k]), "`")
		}
		if head == nil {
			head = cells
			continue
		}
		row := map[string]string{}
		for k := 1; k < len(cells) && k < len(head); k++ {
			if cells[k] != "—" {
				row[head[k]] = cells[k]
			}
		}
		out[cells[0]] = row
	}
	if len(head) != 1+len(commands)-1 { // settle PENDING has no column: refused in every state
		t.Fatalf("the doc's refund table has columns %q", head)
	}
	return out
}

// refundIn builds a book whose refund 7 (amount 4.00 of a 10.00 invoice) is in state.
func refundIn(state string, at time.Time) Book {
	inv := Invoice{InvoiceID: "I1", State: "COMPLETE", Currency: "KES", Value: money.MustParse("10.00"), WalletID: "W1"}
	b := Book{InvoiceID: "I1", MerchantID: "M1", Invoice: inv}
	if state == StateNone {
		return b
	}
	r := Refund{ID: 7, MerchantID: "M1", InvoiceID: "I1", WalletID: "W1", Currency: "KES", Amount: money.MustParse("4.00"),
		Reason: "Other", Status: StatusOf(state), Resolution: "before", Invoice: inv, CreatedAt: at, UpdatedAt: at}
	if state == StateTaken {
		r.TakenAt = at
	}
	b.Refunds = []Refund{r}
	return b
}

// result renders what a command did as the table's cell.
func result(by, state, moneyEffect string) string {
	s := by + ": " + stateNames[state]
	if moneyEffect != MoneyNone {
		s += ", " + moneyEffect
	}
	return s
}

// tried is what Step did with one command of the table: the book after it, the
// refund before and after, the rule's money, or the refusal.
type tried struct {
	book          Book
	before, after Refund
	money         string
	err           error
}

// try runs command c, sent by by, through the book's Step (refund 7 of 4.00, as
// refundIn builds it). A move the table allows that changes nothing (ErrUnchanged)
// is applied: its refund is the same after, and it moves no money.
func try(b Book, c command, by string, at time.Time) tried {
	if c.typ == CmdCreate {
		nb, out, err := Step(b, AddRefund{Invoice: b.Invoice, By: by, MerchantID: "M1", RefundID: 7, Amount: money.MustParse("4.00"),
			Reason: "Other", At: at})
		r, _ := out.(Refund)
		return tried{book: nb, after: r, money: MoneyHold, err: err}
	}
	nb, out, err := Step(b, MoveRefund{RefundID: 7, Cmd: c.typ, Report: c.report, By: by, Resolution: "why", Txn: "TXN", At: at})
	if errors.Is(err, ErrUnchanged) {
		if !sameRefunds(nb, b) {
			err = fmt.Errorf("unchanged, but the book changed")
		} else {
			return tried{book: b, before: b.Refunds[0], after: b.Refunds[0], money: MoneyNone}
		}
	}
	m, _ := out.(Moved)
	return tried{book: nb, before: m.Before, after: m.After, money: m.Rule.Money, err: err}
}

// TestRefundTable tries every (state, command, principal) triple against the
// book's Step (Open and Move) and compares the result with the documented table.
func TestRefundTable(t *testing.T) {
	doc := docTable(t)
	for _, state := range States {
		name := stateNames[state]
		if fmt.Sprint(doc[name]) != fmt.Sprint(documented[name]) {
			t.Errorf("%s: docs/state-machines.md says %v, the test's mirror %v", name, doc[name], documented[name])
		}
	}
	created, later := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	n := 0
	for _, state := range States {
		for _, c := range commands {
			want := documented[stateNames[state]][c.name()]
			for _, by := range principals {
				n++
				b := refundIn(state, created)
				checkTriple(t, state, c, by, want, b, try(b, c, by, later), later)
			}
		}
	}
	if want := len(States) * len(commands) * len(principals); n != want {
		t.Fatalf("tried %d triples, want %d", n, want)
	}
}

// checkTriple compares what a command did in a state (r, on book b) with the
// table's cell want.
func checkTriple(t *testing.T, state string, c command, by, want string, b Book, r tried, later time.Time) {
	t.Helper()
	var got string
	if r.err == nil {
		got = result(by, r.after.State(), r.money)
		// The rule's money is the table's, and it is what the status change
		// means for the hold.
		if c.typ != CmdCreate && (r.money == MoneyDebit && r.after.TransactionID != "TXN" || r.money != MoneyDebit && r.after.TransactionID != "") {
			t.Errorf("%s %s by %s: transaction %q with money %q", name(state), c.name(), by, r.after.TransactionID, r.money)
		}
	}
	cell := want
	if want != "" && !strings.HasPrefix(want, by+": ") {
		cell = "" // another principal's transition: refused for this one
	}
	switch {
	case cell == "" && r.err == nil:
		t.Errorf("%s + %s by %s: applied (%s), want refused", name(state), c.name(), by, got)
	case cell == "" && c.typ != CmdCreate && !sameRefunds(r.book, b):
		t.Errorf("%s + %s by %s: refused (%v) but the book changed", name(state), c.name(), by, r.err)
	case cell != "" && r.err != nil:
		t.Errorf("%s + %s by %s: refused (%v), want %s", name(state), c.name(), by, r.err, cell)
	case cell != "" && got != cell:
		t.Errorf("%s + %s by %s: %s, want %s", name(state), c.name(), by, got, cell)
	}
	if r.err != nil {
		checkRefusal(t, state, c, by, want, r.err)
		return
	}
	if c.typ == CmdCreate {
		return
	}
	// A rail command leaves the refund with the rail; the merchant's never
	// does. Only a public status change touches updated_at and the
	// resolution; a take changes no status.
	if (by == ByRail) == r.after.TakenAt.IsZero() {
		t.Errorf("%s + %s by %s: taken_at %v", name(state), c.name(), by, r.after.TakenAt)
	}
	if changed := r.after.Status != r.before.Status; changed != r.after.UpdatedAt.Equal(later) ||
		changed != (r.after.Resolution == "why") {
		t.Errorf("%s + %s by %s: status %s -> %s, updated_at %v, resolution %q", name(state), c.name(), by,
			r.before.Status, r.after.Status, r.after.UpdatedAt, r.after.Resolution)
	}
	if b.Refunds[0].State() != state {
		t.Errorf("%s + %s by %s: the old book changed", name(state), c.name(), by)
	}
}

func name(state string) string { return stateNames[state] }

func sameRefunds(a, b Book) bool {
	if len(a.Refunds) != len(b.Refunds) {
		return false
	}
	for i := range a.Refunds {
		if a.Refunds[i].State() != b.Refunds[i].State() || !a.Refunds[i].UpdatedAt.Equal(b.Refunds[i].UpdatedAt) {
			return false
		}
	}
	return true
}

// checkRefusal: the merchant's cancel of a refund that is with the rail says so
// (the API's not_cancellable), a command of the wrong principal says that.
func checkRefusal(t *testing.T, state string, c command, by, want string, err error) {
	t.Helper()
	withRail := state == StateTaken || state == StatusDisputed || state == StatusOverdue
	switch {
	case want != "" && !strings.HasPrefix(want, by+": "):
		if !errors.Is(err, ErrPrincipal) {
			t.Errorf("%s + %s by %s: %v, want ErrPrincipal", name(state), c.name(), by, err)
		}
	case c.typ == CmdCancel && withRail:
		if !errors.Is(err, ErrWithRail) {
			t.Errorf("%s + %s by %s: %v, want ErrWithRail", name(state), c.name(), by, err)
		}
	case c.typ == CmdCancel && state == StateNone:
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("%s + %s by %s: %v, want ErrNotFound", name(state), c.name(), by, err)
		}
	case c.typ == CmdCancel:
		if !errors.Is(err, ErrNotCancellable) || errors.Is(err, ErrWithRail) {
			t.Errorf("%s + %s by %s: %v, want ErrNotCancellable", name(state), c.name(), by, err)
		}
	}
}

// Refunds stored before the taken flag existed read as not taken, and the flag
// round-trips through the stored JSON.
func TestTakenFlagStored(t *testing.T) {
	var old Refund
	if err := jsonUnmarshal(`{"id":7,"status":"PENDING","amount":"4.00","created_at":"2026-03-01T12:00:00Z","updated_at":"2026-03-01T12:00:00Z"}`, &old); err != nil {
		t.Fatal(err)
	}
	if old.State() != StatusPending {
		t.Fatalf("an old PENDING refund reads as %s", old.State())
	}
	b, _, _, _, err := Move(Book{Refunds: []Refund{old}}, 7, CmdTake, "", ByRail, "", "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	raw := jsonMarshal(t, b.Refunds[0])
	var back Refund
	if err := jsonUnmarshal(raw, &back); err != nil || back.State() != StateTaken || !strings.Contains(raw, `"taken_at"`) {
		t.Fatalf("taken refund stored as %s, read back as %s (%v)", raw, back.State(), err)
	}
	if s := jsonMarshal(t, old); strings.Contains(s, "taken_at") {
		t.Fatalf("an untaken refund stores %s", s)
	}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

func jsonMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
