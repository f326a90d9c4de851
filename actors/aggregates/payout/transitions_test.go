package payout_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	pf "paysvc/actors/aggregates/payout"
)

var fileStatuses = []string{"", pf.StatusPreview, pf.StatusProcessing, pf.StatusComplete, pf.StatusCancelled, pf.StatusFailed}

var txnStatuses = []string{"", pf.TxnPending, pf.TxnProcessing, pf.TxnComplete, pf.TxnFailed}

// The file machine, written out again so that a change to the table in state.go
// has to be made twice, on purpose.
var wantFileMoves = map[[2]string]bool{
	{"", pf.StatusPreview}:                   true,
	{pf.StatusPreview, pf.StatusProcessing}:  true,
	{pf.StatusPreview, pf.StatusComplete}:    true, // approval with every transaction refused
	{pf.StatusPreview, pf.StatusCancelled}:   true,
	{pf.StatusProcessing, pf.StatusComplete}: true,
}

var wantTxnMoves = map[[2]string]bool{
	{pf.TxnPending, pf.TxnProcessing}:  true,
	{pf.TxnPending, pf.TxnFailed}:      true,
	{pf.TxnProcessing, pf.TxnComplete}: true,
	{pf.TxnProcessing, pf.TxnFailed}:   true,
}

// Both machines, every pair of their statuses (and one that is none).
func TestCanMove_EveryPair(t *testing.T) {
	t.Parallel()
	for _, m := range []struct {
		name     string
		can      func(from, to string) bool
		statuses []string
		want     map[[2]string]bool
	}{
		{"CanMove", pf.CanMove, fileStatuses, wantFileMoves},
		{"CanMoveTxn", pf.CanMoveTxn, txnStatuses, wantTxnMoves},
	} {
		all := append(slices.Clone(m.statuses), "BOGUS")
		for _, from := range all {
			for _, to := range all {
				if got, want := m.can(from, to), m.want[[2]string{from, to}]; got != want {
					t.Errorf("%s(%q, %q) = %v, want %v", m.name, from, to, got, want)
				}
			}
		}
	}
}

// checkTxnMoves fails unless every transaction whose status changed between before
// and after made a move the transaction table allows.
func checkTxnMoves(t *testing.T, before, after pf.State) {
	t.Helper()
	if !before.Exists() {
		return // Create: transactions are born PENDING, not moved
	}
	if len(before.Txns) != len(after.Txns) {
		t.Fatalf("%d txns became %d", len(before.Txns), len(after.Txns))
	}
	for i := range after.Txns {
		from, to := before.Txns[i].Status, after.Txns[i].Status
		if from != to && !pf.CanMoveTxn(from, to) {
			t.Fatalf("txn %s moved %s -> %s, which the table refuses", after.Txns[i].TransactionID, from, to)
		}
	}
}

// fileOrigin is a way to reach a file status with real commands.
type fileOrigin struct {
	name   string
	status string
	build  func(*testing.T) pf.State
}

func fileOrigins() []fileOrigin {
	return []fileOrigin{
		{"Empty", "", func(*testing.T) pf.State { return pf.State{} }},
		{"Preview", pf.StatusPreview, func(t *testing.T) pf.State { return created(t) }},
		{"Processing", pf.StatusProcessing, func(t *testing.T) pf.State {
			s, _ := mustApply(t, processing(t, false), submitted(allOutcomes(processing(t, false))...))
			return s
		}},
		{"ProcessingPartlyPaid", pf.StatusProcessing, func(t *testing.T) pf.State {
			s, _ := mustApply(t, processing(t, true), final(ok("T1")))
			return s
		}},
		{"CompleteByResults", pf.StatusComplete, func(t *testing.T) pf.State {
			s, _ := mustApply(t, processing(t, true), final(ok("T1"), ko("T2"), ok("T3")))
			return s
		}},
		{"CompleteAllRejected", pf.StatusComplete, func(t *testing.T) pf.State {
			s, _ := mustApply(t, created(t), pf.Approve{Rejected: map[string]string{"T1": "a", "T2": "b", "T3": "c"}, At: at})
			return s
		}},
		{"Cancelled", pf.StatusCancelled, func(t *testing.T) pf.State { s, _ := mustApply(t, created(t), pf.Cancel{At: at}); return s }},
		{"Failed", pf.StatusFailed, legacyFailed}, // stored by earlier versions
	}
}

// fileCommand is a command and the status it moves a file to; stay marks a command
// that never moves the file (it may only change transactions).
type fileCommand struct {
	name string
	to   string
	stay bool
	cmd  func(pf.State) any
	// want is the error expected from each status; a missing status means accept.
	want map[string]error
}

func allRejected(s pf.State) map[string]string {
	m := map[string]string{}
	for _, x := range s.Txns {
		m[x.TransactionID] = "rejected"
	}
	return m
}

func allOutcomes(s pf.State) []pf.Outcome {
	var os []pf.Outcome
	for _, x := range s.Txns {
		os = append(os, ok(x.TransactionID))
	}
	return os
}

func fileCommands() []fileCommand {
	notAwaiting := map[string]error{"": pf.ErrNotFound, pf.StatusProcessing: pf.ErrNotAwaitingApproval,
		pf.StatusComplete: pf.ErrNotAwaitingApproval, pf.StatusCancelled: pf.ErrNotAwaitingApproval, pf.StatusFailed: pf.ErrNotAwaitingApproval}
	notProcessing := map[string]error{"": pf.ErrNotFound, pf.StatusPreview: pf.ErrNotProcessing,
		pf.StatusCancelled: pf.ErrNotProcessing, pf.StatusFailed: pf.ErrNotProcessing}
	return []fileCommand{
		{name: "Create", to: pf.StatusPreview,
			cmd: func(pf.State) any { return pf.Create{Header: header(), Txns: threeTxns(), At: later} },
			want: map[string]error{pf.StatusPreview: pf.ErrExists, pf.StatusProcessing: pf.ErrExists,
				pf.StatusComplete: pf.ErrExists, pf.StatusCancelled: pf.ErrExists, pf.StatusFailed: pf.ErrExists}},
		{name: "Approve", to: pf.StatusProcessing,
			cmd: func(pf.State) any { return pf.Approve{SubmitNow: true, At: later} }, want: notAwaiting},
		{name: "ApproveAllRejected", to: pf.StatusComplete,
			cmd: func(s pf.State) any { return pf.Approve{Rejected: allRejected(s), At: later} }, want: notAwaiting},
		{name: "Cancel", to: pf.StatusCancelled,
			cmd: func(pf.State) any { return pf.Cancel{At: later} },
			want: map[string]error{"": pf.ErrNotFound, pf.StatusProcessing: pf.ErrNotCancellable,
				pf.StatusComplete: pf.ErrNotCancellable, pf.StatusCancelled: pf.ErrNotCancellable, pf.StatusFailed: pf.ErrNotCancellable}},
		{name: "ResultsFinalAll", to: pf.StatusComplete,
			cmd: func(s pf.State) any { return final(allOutcomes(s)...) }, want: notProcessing},
		{name: "ResultsSubmittedAll", stay: true,
			cmd: func(s pf.State) any { return submitted(allOutcomes(s)...) }, want: notProcessing},
	}
}

// Every command from every reachable status: Apply accepts exactly what the table
// allows, refuses the rest with the documented error and changes nothing then.
func TestFileTransitions_ApplyAgreesWithTable(t *testing.T) {
	t.Parallel()
	// The subtests below run one after another.
	reached := map[[2]string]bool{}
	refusedAllowed := map[[2]string]string{}
	t.Run("Matrix", func(t *testing.T) {
		for _, o := range fileOrigins() {
			for _, c := range fileCommands() {
				t.Run(fmt.Sprintf("%s_%s", o.name, c.name), func(t *testing.T) {
					s := o.build(t)
					if s.Status != o.status {
						t.Fatalf("origin reached %q, want %q", s.Status, o.status)
					}
					before := clone(s)
					cmd := c.cmd(s)
					n, d, err := pf.Apply(s, cmd)
					wantUnchanged(t, before, s)
					if want := c.want[o.status]; want != nil {
						if !errors.Is(err, want) {
							t.Fatalf("err = %v, want %v", err, want)
						}
						wantUnchanged(t, before, n)
						if !c.stay && pf.CanMove(o.status, c.to) {
							// Allowed, but by another command (PROCESSING -> COMPLETE
							// is the rail's, not Approve's): checked after the matrix.
							refusedAllowed[[2]string{o.status, c.to}] = c.name
						}
						return
					}
					if err != nil {
						t.Fatalf("Apply refused: %v", err)
					}
					checkTxnMoves(t, s, n)
					if n.Status == o.status {
						// Accepted without a move: results on a file being paid, or late
						// results on a COMPLETE file, which must then change nothing.
						if d.Moved {
							t.Fatalf("Delta.Moved without a status change")
						}
						if !c.stay && c.to != o.status && pf.CanMove(o.status, c.to) {
							t.Fatalf("table allows %q -> %q but Apply stayed", o.status, c.to)
						}
						if o.status == pf.StatusComplete {
							wantUnchanged(t, before, n)
						}
						return
					}
					if c.stay || n.Status != c.to || !d.Moved {
						t.Fatalf("moved %q -> %q (Moved=%v), want %q", o.status, n.Status, d.Moved, c.to)
					}
					reached[[2]string{o.status, n.Status}] = true
					if !pf.CanMove(o.status, n.Status) {
						t.Fatalf("Apply moved %q -> %q, which the table refuses", o.status, n.Status)
					}
				})
			}
		}
	})
	for move, cmd := range refusedAllowed {
		if !reached[move] {
			t.Errorf("%s refused %q -> %q, which the table allows and no command makes", cmd, move[0], move[1])
		}
	}
	// Every move the table allows is made by some command.
	for move := range wantFileMoves {
		if !reached[move] {
			t.Errorf("no command makes the allowed move %q -> %q", move[0], move[1])
		}
	}
}

// Each transaction status reachable inside a file being paid, against each rail
// answer: the answer moves the transaction exactly when the table allows it.
func TestTxnTransitions_ApplyAgreesWithTable(t *testing.T) {
	t.Parallel()
	origins := []struct {
		name   string
		status string
		build  func(*testing.T) pf.State
	}{
		{"Pending", pf.TxnPending, func(t *testing.T) pf.State { return processing(t, false) }},
		{"ProcessingBySubmitNow", pf.TxnProcessing, func(t *testing.T) pf.State { return processing(t, true) }},
		{"ProcessingBySubmitted", pf.TxnProcessing, func(t *testing.T) pf.State {
			s, _ := mustApply(t, processing(t, false), submitted(ok("T1")))
			return s
		}},
		{"Complete", pf.TxnComplete, func(t *testing.T) pf.State { s, _ := mustApply(t, processing(t, true), final(ok("T1"))); return s }},
		{"FailedByRail", pf.TxnFailed, func(t *testing.T) pf.State { s, _ := mustApply(t, processing(t, true), final(ko("T1"))); return s }},
		{"FailedByRejection", pf.TxnFailed, func(t *testing.T) pf.State {
			s, _ := mustApply(t, created(t), pf.Approve{Rejected: map[string]string{"T1": "dup"}, At: at})
			return s
		}},
	}
	answers := []struct {
		name string
		to   string
		cmd  pf.Results
	}{
		{"Submitted", pf.TxnProcessing, submitted(ok("T1"))},
		{"FinalSuccess", pf.TxnComplete, final(ok("T1"))},
		{"FinalFailure", pf.TxnFailed, final(ko("T1"))},
	}
	// A rail's answer makes every move of the table but PENDING -> FAILED, which only
	// approval makes (a rejected transaction): a rail's FINAL needs the submission.
	railMoves := map[[2]string]bool{}
	for m := range wantTxnMoves {
		railMoves[m] = m != [2]string{pf.TxnPending, pf.TxnFailed}
	}
	reached := map[[2]string]bool{}
	for _, o := range origins {
		if o.name == "FailedByRejection" {
			reached[[2]string{pf.TxnPending, pf.TxnFailed}] = true // checked by the build below
		}
		for _, a := range answers {
			s := o.build(t)
			if s.Status != pf.StatusProcessing || s.Txns[0].Status != o.status {
				t.Fatalf("%s: file %s, T1 %s", o.name, s.Status, s.Txns[0].Status)
			}
			n, d, err := pf.Apply(s, a.cmd)
			if err != nil {
				t.Fatalf("%s/%s: %v", o.name, a.name, err)
			}
			checkTxnMoves(t, s, n)
			moved := n.Txns[0].Status != o.status
			if allowed := railMoves[[2]string{o.status, a.to}]; moved != allowed {
				t.Errorf("%s/%s: %s -> %s moved=%v, table allows=%v", o.name, a.name, o.status, a.to, moved, allowed)
				continue
			}
			if moved {
				reached[[2]string{o.status, n.Txns[0].Status}] = true
				if n.Txns[0].Status != a.to || len(d.Changed) != 1 || d.Changed[0] != 0 || d.Ignored != 0 || n.Version != s.Version+1 {
					t.Errorf("%s/%s: T1 %s, delta %+v", o.name, a.name, n.Txns[0].Status, d)
				}
			} else {
				if d.Ignored != 1 || len(d.Changed) != 0 {
					t.Errorf("%s/%s: delta %+v", o.name, a.name, d)
				}
				wantUnchanged(t, s, n)
			}
		}
	}
	for move := range wantTxnMoves {
		if !reached[move] {
			t.Errorf("no rail answer makes the allowed move %s -> %s", move[0], move[1])
		}
	}
}
