package payout

import (
	"errors"
	"time"

	"paysvc/actors/values/money"
)

// Create opens a file awaiting approval. Transactions come validated by the API
// and priced by payoutkind (the fee schedule); Create sets their status.
type Create struct {
	Header Header
	Txns   []Txn
	At     time.Time
}

// Approve starts paying a file. Rejected names transactions refused before any
// money moves (an idempotency key already paid), with the reason. SubmitNow marks
// the others PROCESSING at once, for providers whose submission is the approval
// itself (P2P: the credit command is queued in the same transaction).
type Approve struct {
	Rejected  map[string]string
	SubmitNow bool
	At        time.Time
}

// Cancel cancels a file awaiting approval.
type Cancel struct{ At time.Time }

// Outcome is a rail's answer for one transaction.
type Outcome struct {
	TransactionID       string
	Success             bool
	Description         string
	ProviderReference   string
	ProviderAccountName string
}

// Results applies a rail's outcomes. Stage SUBMITTED moves PENDING transactions to
// PROCESSING: the rails role sends it before the request leaves, so PROCESSING is
// the record that a rail has the transaction. FINAL gives PROCESSING transactions
// their outcome. An outcome for a transaction that already has one is ignored, so
// a repeated or regrouped report moves nothing twice, and so is a FINAL outcome for
// one still PENDING (never submitted: no rail can know its outcome).
type Results struct {
	Final    bool
	Outcomes []Outcome
	At       time.Time
}

// Operator is an operator's command on a file being paid (paysvc payout
// hold|release|fail): Action is ActionHold (its unsent transactions wait),
// ActionRelease (they are sent again) or ActionFail (they fail, and their hold is
// released; transactions a rail has are left to their outcome). By, Reason and
// CommandID go into the file's audit (Header.OperatorActions).
type Operator struct {
	Action    string
	By        string
	Reason    string
	CommandID string
	At        time.Time
}

// Payment is a transaction completed by a command: its amount and charge leave the
// wallet's hold for good.
type Payment struct {
	TransactionID string
	Account       string
	Amount        money.Amount
	Charge        money.Amount
}

// Delta is what a command means for money and storage.
type Delta struct {
	Hold    money.Amount // Approve: to hold in the wallet (zero when nothing is payable)
	Paid    []Payment    // transactions completed now
	Release money.Amount // failed now: back to the wallet's available balance
	Changed []int        // positions of the transactions changed
	Ignored int          // outcomes ignored (already final, unknown, or never submitted)
	// Unsubmitted names the transactions a FINAL outcome was ignored for because
	// they were never submitted (still PENDING): worth a warning, since only a
	// forged or misrouted result can do that.
	Unsubmitted []string
	Moved       bool // the file's status changed
}

// Errors of Apply.
var (
	ErrExists              = errors.New("payment file already exists")
	ErrNotFound            = errors.New("payment file not found")
	ErrInvalid             = errors.New("invalid payment file")
	ErrNotAwaitingApproval = errors.New("the file is not awaiting approval")
	ErrNotCancellable      = errors.New("the file can only be cancelled while it awaits approval")
	ErrNotProcessing       = errors.New("the file is not being paid")
	ErrHoldMismatch        = errors.New("payment file: hold does not reconcile")
	// ErrOnHold refuses a submission (SUBMITTED) of a held file's transactions:
	// nothing is sent until an operator releases it.
	ErrOnHold = errors.New("the file is on hold: nothing is sent until an operator releases it")
	// ErrNoChange answers an operator command that would change nothing (hold of
	// a held file, release of a file not held, fail of a file with nothing
	// unsent): the file is as asked already.
	ErrNoChange = errors.New("nothing to change")
)

// Unsent reports whether a transaction was never handed to a rail: still
// PENDING in a file being paid.
func (t Txn) Unsent() bool { return t.Status == TxnPending }
