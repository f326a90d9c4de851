package payout

import (
	"fmt"
	"slices"
	"time"

	"paysvc/actors/values/money"
)

// Apply decides one command against a file. It is pure: it returns the new state
// and what the change means for money, or an error and changes nothing.
func Apply(s State, cmd any) (State, Delta, error) {
	switch c := cmd.(type) {
	case Create:
		return applyCreate(s, c)
	case Approve:
		return applyApprove(s, c)
	case Cancel:
		return applyCancel(s, c)
	case Results:
		return applyResults(s, c)
	case Operator:
		return applyOperator(s, c)
	default:
		return s, Delta{}, fmt.Errorf("payout: unknown command %T", cmd)
	}
}

func applyCreate(s State, c Create) (State, Delta, error) {
	if s.Exists() {
		return s, Delta{}, ErrExists
	}
	h := c.Header
	if h.FileID == "" || h.MerchantID == "" || h.WalletID == "" || h.Provider == "" || h.Currency == "" || len(c.Txns) == 0 {
		return s, Delta{}, ErrInvalid
	}
	total, charges := money.Zero(), money.Zero()
	txns := make([]Txn, len(c.Txns))
	seen := make(map[string]bool, len(c.Txns))
	for i, t := range c.Txns {
		if t.TransactionID == "" || seen[t.TransactionID] || t.Amount.Sign() <= 0 || t.Charge.Sign() < 0 {
			return s, Delta{}, ErrInvalid
		}
		seen[t.TransactionID] = true
		t.Status, t.StatusCode, t.StatusDescription = TxnPending, TxnCodeNew, ""
		t.ProviderReference, t.ProviderAccountName = "", ""
		t.CreatedAt, t.UpdatedAt = c.At, c.At
		txns[i] = t
		total = total.Add(t.Amount)
		charges = charges.Add(t.Charge)
	}
	h.Status, h.StatusCode, h.FailedReason = StatusPreview, CodeAwaiting, ""
	h.TotalAmount, h.ChargeEstimate = total, charges
	h.Held, h.PaidAmount, h.FailedAmount, h.ActualCharges = money.Zero(), money.Zero(), money.Zero(), money.Zero()
	h.Finished, h.Count = 0, len(txns)
	h.Version, h.CreatedAt, h.UpdatedAt = 1, c.At, c.At
	changed := make([]int, len(txns))
	for i := range changed {
		changed[i] = i
	}
	return State{Header: h, Txns: txns}, Delta{Changed: changed, Moved: true}, nil
}

// HoldFor is what approving s with these rejections holds: every payable
// transaction's amount plus charge.
func HoldFor(s State, rejected map[string]string) money.Amount {
	hold := money.Zero()
	for _, t := range s.Txns {
		if _, no := rejected[t.TransactionID]; !no {
			hold = hold.Add(t.Amount).Add(t.Charge)
		}
	}
	return hold
}

func applyApprove(s State, c Approve) (State, Delta, error) {
	if !s.Exists() {
		return s, Delta{}, ErrNotFound
	}
	if s.Status != StatusPreview {
		return s, Delta{}, ErrNotAwaitingApproval
	}
	n := s
	n.Txns = slices.Clone(s.Txns)
	d := Delta{Moved: true, Changed: make([]int, 0, len(n.Txns))}
	for i := range n.Txns {
		t := &n.Txns[i]
		if reason, no := c.Rejected[t.TransactionID]; no {
			t.Status, t.StatusCode, t.StatusDescription, t.UpdatedAt = TxnFailed, TxnCodeFailed, reason, c.At
			n.FailedAmount = n.FailedAmount.Add(t.Amount)
			n.Finished++
			d.Changed = append(d.Changed, i)
			continue
		}
		n.Held = n.Held.Add(t.Amount).Add(t.Charge)
		if c.SubmitNow {
			t.Status, t.StatusCode, t.UpdatedAt = TxnProcessing, TxnCodeStarted, c.At
			d.Changed = append(d.Changed, i)
		}
	}
	d.Hold = n.Held
	n.Status, n.StatusCode = StatusProcessing, CodePaying
	if n.Finished == n.Count {
		n.Status, n.StatusCode = StatusComplete, CodeCompleted
	}
	n.Version++
	n.UpdatedAt = c.At
	return n, d, nil
}

func applyCancel(s State, c Cancel) (State, Delta, error) {
	if !s.Exists() {
		return s, Delta{}, ErrNotFound
	}
	if s.Status != StatusPreview {
		return s, Delta{}, ErrNotCancellable
	}
	n := s
	n.Txns = slices.Clone(s.Txns)
	d := Delta{Moved: true, Changed: make([]int, len(n.Txns))}
	for i := range n.Txns {
		// Cancelled transactions stay PENDING (the spec); their code says why.
		n.Txns[i].StatusCode, n.Txns[i].UpdatedAt = TxnCodeCancelled, c.At
		d.Changed[i] = i
	}
	n.Status, n.StatusCode = StatusCancelled, CodeCancelled
	n.Version++
	n.UpdatedAt = c.At
	return n, d, nil
}

func applyResults(s State, c Results) (State, Delta, error) {
	if !s.Exists() {
		return s, Delta{}, ErrNotFound
	}
	switch s.Status {
	case StatusProcessing:
	case StatusComplete:
		// Every transaction has its outcome: a late report is a repeat.
		return s, Delta{Ignored: len(c.Outcomes)}, nil
	default:
		return s, Delta{}, ErrNotProcessing
	}
	if !c.Final && s.OnHold {
		// The rails report a submission before the request leaves and send only
		// once it applied: refusing it keeps a held file's transactions unsent.
		return s, Delta{}, ErrOnHold
	}
	idx := s.Index()
	n := s
	n.Txns = slices.Clone(s.Txns)
	d := Delta{Release: money.Zero()}
	for _, o := range c.Outcomes {
		i, ok := idx[o.TransactionID]
		if !ok {
			d.Ignored++
			continue
		}
		t := &n.Txns[i]
		if !c.Final {
			if t.Status != TxnPending {
				d.Ignored++
				continue
			}
			t.Status, t.StatusCode, t.UpdatedAt = TxnProcessing, TxnCodeStarted, c.At
			d.Changed = append(d.Changed, i)
			continue
		}
		if t.Final() {
			d.Ignored++
			continue
		}
		if t.Status != TxnProcessing {
			// Never submitted: no rail has it, so no rail can report its outcome.
			// Whatever claims to (a forged or misdirected callback) is ignored; were it
			// a failure it would release the hold of a payment still to be sent.
			d.Ignored++
			d.Unsubmitted = append(d.Unsubmitted, t.TransactionID)
			continue
		}
		out, err := n.take(*t)
		if err != nil {
			return s, Delta{}, err
		}
		if !o.Success {
			n.fail(i, o.Description, out, c.At, &d)
			continue
		}
		t.Status, t.StatusCode = TxnComplete, TxnCodeSuccess
		t.StatusDescription = o.Description
		t.ProviderReference, t.ProviderAccountName = o.ProviderReference, o.ProviderAccountName
		n.PaidAmount = n.PaidAmount.Add(t.Amount)
		n.ActualCharges = n.ActualCharges.Add(t.Charge)
		d.Paid = append(d.Paid, Payment{TransactionID: t.TransactionID, Account: t.Account, Amount: t.Amount, Charge: t.Charge})
		t.UpdatedAt = c.At
		n.Finished++
		d.Changed = append(d.Changed, i)
	}
	if len(d.Changed) == 0 {
		return s, Delta{Ignored: d.Ignored, Unsubmitted: d.Unsubmitted, Release: money.Zero()}, nil
	}
	if err := n.finish(&d); err != nil {
		return s, Delta{}, err
	}
	n.Version++
	n.UpdatedAt = c.At
	return n, d, nil
}

// applyOperator applies an operator's hold, release or fail of a file being paid.
// Only a PROCESSING file has transactions a rail may still be sent; any other is
// ErrNotProcessing. A command that would change nothing is ErrNoChange, and the
// file stays as it is (no audit line either: the audit lists changes).
func applyOperator(s State, c Operator) (State, Delta, error) {
	if !s.Exists() {
		return s, Delta{}, ErrNotFound
	}
	if s.Status != StatusProcessing {
		return s, Delta{}, ErrNotProcessing
	}
	n := s
	d := Delta{Release: money.Zero()}
	action := OperatorAction{Action: c.Action, By: c.By, Reason: c.Reason, CommandID: c.CommandID, At: c.At}
	switch c.Action {
	case ActionHold:
		if s.OnHold {
			return s, Delta{}, ErrNoChange
		}
		n.OnHold = true
	case ActionRelease:
		if !s.OnHold {
			return s, Delta{}, ErrNoChange
		}
		n.OnHold = false
	case ActionFail:
		if c.Reason == "" {
			return s, Delta{}, ErrInvalid
		}
		n.Txns = slices.Clone(s.Txns)
		for i, t := range n.Txns {
			if !t.Unsent() {
				continue // a rail has it (or it has its outcome): left to that outcome
			}
			out, err := n.take(t)
			if err != nil {
				return s, Delta{}, err
			}
			n.fail(i, "Failed by the operator: "+c.Reason, out, c.At, &d)
		}
		if len(d.Changed) == 0 {
			return s, Delta{}, ErrNoChange
		}
		action.Failed = len(d.Changed)
		n.FailedByOperator, n.OnHold = true, false
		n.FailedReason = "Failed by the operator: " + c.Reason
		if err := n.finish(&d); err != nil {
			return s, Delta{}, err
		}
	default:
		return s, Delta{}, ErrInvalid
	}
	n.OperatorActions = append(slices.Clone(s.OperatorActions), action)
	n.Version++
	n.UpdatedAt = c.At
	return n, d, nil
}

// take takes a transaction's amount plus charge, which its outcome pays or
// releases, out of what the file holds. A file holding less is refused
// (ErrHoldMismatch): no outcome pays or releases money the file does not hold.
func (n *State) take(t Txn) (money.Amount, error) {
	out := t.Amount.Add(t.Charge)
	if n.Held.Cmp(out) < 0 {
		return out, fmt.Errorf("%w: %s holds %s, transaction %s needs %s", ErrHoldMismatch, n.FileID, n.Held, t.TransactionID, out)
	}
	n.Held = n.Held.Sub(out)
	return out, nil
}

// fail gives transaction i its failure, with desc: its amount counts as failed,
// and out (what take took for it) goes back to the wallet's available balance.
func (n *State) fail(i int, desc string, out money.Amount, at time.Time, d *Delta) {
	t := &n.Txns[i]
	t.Status, t.StatusCode, t.StatusDescription, t.UpdatedAt = TxnFailed, TxnCodeFailed, desc, at
	n.FailedAmount = n.FailedAmount.Add(t.Amount)
	d.Release = d.Release.Add(out)
	n.Finished++
	d.Changed = append(d.Changed, i)
}

// finish completes a file once every transaction has its outcome; nothing may
// then be held (ErrHoldMismatch), and nothing is left to hold back.
func (n *State) finish(d *Delta) error {
	if n.Finished != n.Count {
		return nil
	}
	if n.Held.Sign() != 0 {
		return fmt.Errorf("%w: %s complete with %s still held", ErrHoldMismatch, n.FileID, n.Held)
	}
	n.Status, n.StatusCode = StatusComplete, CodeCompleted
	n.OnHold = false
	d.Moved = true
	return nil
}
