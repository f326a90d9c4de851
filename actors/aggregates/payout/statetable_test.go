package payout_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	pf "paysvc/actors/aggregates/payout"
	"paysvc/actors/aggregates/statedoc"
	"paysvc/actors/values/money"
)

// row is one line of a table in docs/state-machines.md, "Payment file (payouts)".
type row struct{ state, command, principal, result, money string }

// Principals of the rail's results (and operatorBy, of the operator's hold,
// release and fail: paysvc payout hold|release|fail). A FINAL outcome is the same command
// (payout.results, stage FINAL) whoever sends it: the rails role (simulator or live
// adapter), the operator (`paysvc payout finish`) or the engine (a P2P credit's
// follow-up), so it is one row, tried once.
const (
	finalBy     = "rail, operator, engine (P2P)"
	submittedBy = "rail"
	operatorBy  = "operator"
	perTxn      = "per transaction (next table)"
)

// The tables of docs/state-machines.md, "Payment file (payouts)": the file table
// (every command in every state) and the transaction table (one outcome for
// transaction T1 of a file being paid, by T1's status). The tests below read
// them from the document and hold every row against Apply, so the document is
// the one copy. Money: "hold" is wallet.Hold of every payable transaction's
// amount plus charge (the engine refuses the approval, insufficient_balance,
// before Apply when the available balance cannot cover it); "debit" is
// wallet.Disburse of the amount to the provider's clearing account and the
// charge to fees, out of the hold; "release" is wallet.Release of amount plus
// charge back to available.
const (
	fileTable = "| File status | Command | Principal | Result | Money |"
	txnTable  = "| Transaction status | Outcome | Principal | Result | Money |"
)

// table is one of the tables as a test walks it: its rows by (state, command),
// and which of them the test used.
type table struct {
	t      *testing.T
	header string
	rows   []row
	byCell map[[2]string]row
	used   map[[2]string]bool
}

// readTable reads one of the tables, each row's five cells, one row per
// (state, command).
func readTable(t *testing.T, header string) *table {
	t.Helper()
	tb := &table{t: t, header: header, byCell: map[[2]string]row{}, used: map[[2]string]bool{}}
	for i, c := range statedoc.Table(t, "## Payment file (payouts)", header) {
		if len(c) != 5 {
			t.Fatalf("%s row %d: %d cells, want 5", header, i+1, len(c))
		}
		r := row{c[0], c[1], c[2], c[3], c[4]}
		if _, dup := tb.byCell[[2]string{r.state, r.command}]; dup {
			t.Fatalf("two rows for (%s, %s)", r.state, r.command)
		}
		tb.byCell[[2]string{r.state, r.command}] = r
		tb.rows = append(tb.rows, r)
	}
	return tb
}

// row is the row of (state, command), marked used; a pair without a row, or a
// row of another principal than the command's, fails the test.
func (tb *table) row(state, command, principal string) (row, bool) {
	tb.t.Helper()
	r, ok := tb.byCell[[2]string{state, command}]
	if !ok {
		tb.t.Errorf("(%s, %s): no row in %s", state, command, tb.header)
		return r, false
	}
	tb.used[[2]string{state, command}] = true
	if r.principal != principal {
		tb.t.Errorf("(%s, %s): principal %q, the command is %q's", state, command, r.principal, principal)
	}
	return r, true
}

// allUsed fails the test for each row that names a state or command it did not
// build.
func (tb *table) allUsed() {
	tb.t.Helper()
	for _, r := range tb.rows {
		if !tb.used[[2]string{r.state, r.command}] {
			tb.t.Errorf("row (%s, %s) names a state or command the test does not build", r.state, r.command)
		}
	}
}

type builder struct {
	label string
	build func(*testing.T) pf.State
}

// tableFileStates builds each file status with real commands; a status reached
// in more than one way is built each way, and each must match the same row.
func tableFileStates() []builder {
	return []builder{
		{"none", func(*testing.T) pf.State { return pf.State{} }},
		{"PREVIEW-AND-APPROVE", func(t *testing.T) pf.State { return created(t) }},
		{"PROCESSING", func(t *testing.T) pf.State { return processing(t, false) }},
		{"COMPLETE", func(t *testing.T) pf.State {
			s, _ := mustApply(t, processing(t, true), final(ok("T1"), ko("T2"), ok("T3")))
			return s
		}},
		{"COMPLETE", func(t *testing.T) pf.State {
			s, _ := mustApply(t, created(t), pf.Approve{Rejected: allRejected(created(t)), At: at})
			return s
		}},
		{"CANCELLED", func(t *testing.T) pf.State { s, _ := mustApply(t, created(t), pf.Cancel{At: at}); return s }},
		{"PROCESSING, on hold", func(t *testing.T) pf.State {
			s, _ := mustApply(t, processing(t, false), pf.Operator{Action: pf.ActionHold, By: "ops", Reason: "stolen key", At: at})
			return s
		}},
		{"FAILED", legacyFailed}, // stored by earlier versions; no command makes one now
	}
}

type tableCommand struct {
	name, principal string
	cmd             func(pf.State) any
}

// tableFileCommands are the pure commands the engine makes of each principal's
// command (actors/aggregates/payout/payoutkind): payout.initiate -> Create (and, with
// requires_approval NO, Approve in the same command); payout.approve -> Approve,
// with Rejected the transactions whose idempotency key is already used and
// SubmitNow for P2P (the credits are queued in the same batch); payout.cancel ->
// Cancel; payout.results -> Results, Final when the stage is FINAL (any other
// stage is SUBMITTED, which moves no money).
func tableFileCommands() []tableCommand {
	outcomes := func(s pf.State, success bool) []pf.Outcome {
		var os []pf.Outcome
		for _, x := range s.Txns {
			o := ko(x.TransactionID)
			if success {
				o = ok(x.TransactionID)
			}
			os = append(os, o)
		}
		return os
	}
	return []tableCommand{
		{"create", "merchant", func(pf.State) any { return pf.Create{Header: header(), Txns: threeTxns(), At: later} }},
		{"approve", "merchant", func(pf.State) any { return pf.Approve{At: later} }},
		{"approve, P2P", "merchant", func(pf.State) any { return pf.Approve{SubmitNow: true, At: later} }},
		{"approve, every transaction refused", "merchant", func(s pf.State) any {
			return pf.Approve{Rejected: allRejected(s), SubmitNow: true, At: later}
		}},
		{"cancel", "merchant", func(pf.State) any { return pf.Cancel{At: later} }},
		{"SUBMITTED", submittedBy, func(s pf.State) any { return submitted(outcomes(s, true)...) }},
		{"FINAL success", finalBy, func(s pf.State) any { return final(outcomes(s, true)...) }},
		{"FINAL failure", finalBy, func(s pf.State) any { return final(outcomes(s, false)...) }},
		{"hold", operatorBy, func(pf.State) any { return pf.Operator{Action: pf.ActionHold, By: "ops", Reason: "why", At: later} }},
		{"release", operatorBy, func(pf.State) any { return pf.Operator{Action: pf.ActionRelease, By: "ops", At: later} }},
		{"fail", operatorBy, func(pf.State) any { return pf.Operator{Action: pf.ActionFail, By: "ops", Reason: "why", At: later} }},
	}
}

// refusal names Apply's errors as the tables do.
func refusal(err error) string {
	for _, e := range []struct {
		err  error
		name string
	}{
		{pf.ErrNotFound, "not found"}, {pf.ErrExists, "already exists"},
		{pf.ErrNotAwaitingApproval, "not awaiting approval"}, {pf.ErrNotCancellable, "not cancellable"},
		{pf.ErrNotProcessing, "not being paid"}, {pf.ErrHoldMismatch, "hold does not reconcile"},
		{pf.ErrOnHold, "on hold"}, {pf.ErrNoChange, "nothing to change"},
	} {
		if errors.Is(err, e.err) {
			return "refused: " + e.name
		}
	}
	return "refused: " + err.Error()
}

// txnLabels lists the transactions' distinct "STATUS CODE", in file order.
func txnLabels(s pf.State) string {
	var out []string
	for _, x := range s.Txns {
		l := x.Status + " " + x.StatusCode
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return strings.Join(out, ", ")
}

// fileMoney says what the engine moves for a file command's Delta, and checks the
// amounts: a hold is every payable transaction's amount plus charge.
func fileMoney(t *testing.T, s, n pf.State, cmd any, d pf.Delta) string {
	t.Helper()
	if o, ok := cmd.(pf.Operator); ok && o.Action == pf.ActionFail && d.Release.Sign() != 0 {
		// An operator's fail releases what the unsent transactions hold.
		want := money.Zero()
		for _, x := range s.Txns {
			if x.Unsent() {
				want = want.Add(x.Amount).Add(x.Charge)
			}
		}
		if len(d.Paid) > 0 || !d.Release.Equal(want) || !n.Held.Equal(s.Held.Sub(want)) {
			t.Fatalf("fail released %s (hold %s -> %s), want %s", d.Release, s.Held, n.Held, want)
		}
		return "release: unsent amounts + charges to available"
	}
	if len(d.Paid) > 0 || d.Release.Sign() != 0 {
		t.Fatalf("%T paid %v / released %s", cmd, d.Paid, d.Release)
	}
	if d.Hold.Sign() == 0 {
		return "nothing"
	}
	a, _ := cmd.(pf.Approve)
	want := money.Zero()
	for _, x := range s.Txns {
		if _, no := a.Rejected[x.TransactionID]; !no {
			want = want.Add(x.Amount).Add(x.Charge)
		}
	}
	if !d.Hold.Equal(want) || !n.Held.Equal(want) || !pf.HoldFor(s, a.Rejected).Equal(want) {
		t.Fatalf("hold %s (file %s), want %s", d.Hold, n.Held, want)
	}
	return "hold: amounts + charges"
}

// Every file status x every command, against the file table. A (status, command)
// pair without a row fails, as does a row no pair used.
func TestPayoutFileTable_EveryStateEveryCommand(t *testing.T) {
	t.Parallel()
	table := readTable(t, fileTable)
	for _, st := range tableFileStates() {
		for _, c := range tableFileCommands() {
			r, ok := table.row(st.label, c.name, c.principal)
			if !ok {
				continue
			}
			s := st.build(t)
			if got := fileLabel(s); got != st.label {
				t.Fatalf("%s: built %s", st.label, got)
			}
			if r.result == perTxn {
				// Results on a file being paid act per transaction: the transaction
				// table's own loop (TestPayoutTxnTable_EveryStateEveryCommand) covers
				// these cells.
				continue
			}
			before := clone(s)
			cmd := c.cmd(s)
			n, d, err := pf.Apply(s, cmd)
			wantUnchanged(t, before, s)
			var res, moved string
			switch {
			case err != nil:
				wantUnchanged(t, before, n)
				res, moved = refusal(err), fileMoney(t, s, n, cmd, d)
			case reflect.DeepEqual(n, before):
				res, moved = "ignored: no change", fileMoney(t, s, n, cmd, d)
			default:
				res, moved = fileLabel(n)+", transactions "+txnLabels(n), fileMoney(t, s, n, cmd, d)
				if d.Moved != (n.Status != s.Status) || n.Version != s.Version+1 && s.Exists() {
					t.Errorf("(%s, %s): Moved %v, version %d -> %d", st.label, c.name, d.Moved, s.Version, n.Version)
				}
			}
			if res != r.result || moved != r.money {
				t.Errorf("(%s, %s): got %q / %q, table says %q / %q", st.label, c.name, res, moved, r.result, r.money)
			}
		}
	}
	table.allUsed()
}

func fileLabel(s pf.State) string {
	if !s.Exists() {
		return "none"
	}
	if s.OnHold {
		return s.Status + ", on hold"
	}
	return s.Status
}

// tableTxnStates builds a PROCESSING file whose transaction T1 is in each status
// of the transaction table (the others stay open, so the file stays PROCESSING,
// except for "last open"). id is the transaction the outcome names.
func tableTxnStates() []struct {
	builder
	id string
} {
	after := func(submitNow bool, cmd any) func(*testing.T) pf.State {
		return func(t *testing.T) pf.State {
			s, _ := mustApply(t, processing(t, submitNow), cmd)
			return s
		}
	}
	type b = struct {
		builder
		id string
	}
	return []b{
		{builder{"PENDING", func(t *testing.T) pf.State { return processing(t, false) }}, "T1"},
		{builder{"PROCESSING", func(t *testing.T) pf.State { return processing(t, true) }}, "T1"},
		{builder{"PROCESSING", after(false, submitted(ok("T1")))}, "T1"},
		{builder{"PROCESSING, last open", after(true, final(ok("T2"), ko("T3")))}, "T1"},
		// No command leaves a file holding less than its open transactions need; a
		// stored file that does (a corrupt row) must refuse outcomes rather than pay
		// or release money it does not hold.
		{builder{"PROCESSING, hold short", func(t *testing.T) pf.State {
			s := processing(t, true)
			s.Held = amt("1.00")
			return s
		}}, "T1"},
		{builder{"COMPLETE", after(true, final(ok("T1")))}, "T1"},
		{builder{"FAILED", after(true, final(ko("T1")))}, "T1"},
		{builder{"FAILED", func(t *testing.T) pf.State { // refused at approval (idempotency key already used)
			s, _ := mustApply(t, created(t), pf.Approve{Rejected: map[string]string{"T1": "dup"}, At: at})
			return s
		}}, "T1"},
		{builder{"not in the file", func(t *testing.T) pf.State { return processing(t, true) }}, "T9"},
	}
}

func txnLabel(s pf.State, id string) string {
	if s.Status != pf.StatusProcessing {
		return "file " + s.Status
	}
	i, ok := s.Index()[id]
	if !ok {
		return "not in the file"
	}
	x := s.Txns[i]
	if x.Status != pf.TxnProcessing {
		return x.Status
	}
	open, need := 0, money.Zero()
	for _, y := range s.Txns {
		if !y.Final() {
			open++
			need = need.Add(y.Amount).Add(y.Charge)
		}
	}
	switch {
	case s.Held.Cmp(need) < 0:
		return "PROCESSING, hold short"
	case open == 1:
		return "PROCESSING, last open"
	}
	return "PROCESSING"
}

// Every transaction status x every rail outcome, against the transaction table.
func TestPayoutTxnTable_EveryStateEveryCommand(t *testing.T) {
	t.Parallel()
	table := readTable(t, txnTable)
	commands := []struct {
		name, principal string
		cmd             func(id string) pf.Results
	}{
		{"SUBMITTED", submittedBy, func(id string) pf.Results { return submitted(ok(id)) }},
		{"FINAL success", finalBy, func(id string) pf.Results { return final(ok(id)) }},
		{"FINAL failure", finalBy, func(id string) pf.Results { return final(ko(id)) }},
	}
	for _, st := range tableTxnStates() {
		for _, c := range commands {
			r, found := table.row(st.label, c.name, c.principal)
			if !found {
				continue
			}
			s := st.build(t)
			if got := txnLabel(s, st.id); got != st.label {
				t.Fatalf("%s: built %s", st.label, got)
			}
			before := clone(s)
			n, d, err := pf.Apply(s, c.cmd(st.id))
			wantUnchanged(t, before, s)
			res, moved := "", "nothing"
			switch {
			case err != nil:
				wantUnchanged(t, before, n)
				res = refusal(err)
			case len(d.Changed) == 0:
				wantUnchanged(t, before, n)
				switch {
				case len(d.Unsubmitted) > 0:
					res = "ignored: never submitted"
				case st.label == "not in the file":
					res = "ignored: not in the file"
				case s.Txns[0].Final():
					res = "ignored: has its outcome"
				default:
					res = "ignored: no change"
				}
				if d.Ignored != 1 {
					t.Errorf("(%s, %s): ignored %d outcomes, want 1", st.label, c.name, d.Ignored)
				}
			default:
				x := n.Txns[0]
				res = x.Status + " " + x.StatusCode
				if n.Status != s.Status {
					res += "; file " + n.Status + " " + n.StatusCode
				}
				moved = txnMoney(t, s, n, d)
			}
			if err == nil && len(d.Changed) == 0 && (len(d.Paid) > 0 || d.Release.Sign() > 0) {
				t.Errorf("(%s, %s): money moved for an ignored outcome: %+v", st.label, c.name, d)
			}
			if res != r.result || moved != r.money {
				t.Errorf("(%s, %s): got %q / %q, table says %q / %q", st.label, c.name, res, moved, r.result, r.money)
			}
		}
	}
	table.allUsed()
}

// txnMoney says what the engine moves for T1's outcome (settlePayouts: Paid ->
// wallet.Disburse, Release -> wallet.Release) and checks the amounts against T1
// and the file's hold.
func txnMoney(t *testing.T, s, n pf.State, d pf.Delta) string {
	t.Helper()
	x := s.Txns[0]
	out := x.Amount.Add(x.Charge)
	paid := len(d.Paid) > 0
	released := d.Release.Sign() > 0
	switch {
	case paid && released:
		t.Fatalf("one outcome both paid and released: %+v", d)
	case paid:
		p := d.Paid[0]
		if len(d.Paid) != 1 || p.TransactionID != x.TransactionID || !p.Amount.Equal(x.Amount) || !p.Charge.Equal(x.Charge) {
			t.Fatalf("paid %+v, want %s", d.Paid, x.TransactionID)
		}
	case released:
		if !d.Release.Equal(out) {
			t.Fatalf("released %s, want %s", d.Release, out)
		}
	default:
		return "nothing"
	}
	if !s.Held.Sub(out).Equal(n.Held) {
		t.Fatalf("hold %s -> %s, want down by %s", s.Held, n.Held, out)
	}
	if paid {
		return "debit: amount + charge from the hold"
	}
	return "release: amount + charge to available"
}
