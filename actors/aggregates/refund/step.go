package refund

import (
	"errors"
	"fmt"
	"time"

	"paysvc/actors/values/money"
)

// The book's messages, as its actor hosts it (actors/engine/aggregate): refundkind
// asks a book with one of these, built from a command and the batch's time.

// AddRefund opens a PENDING refund in the book (refund.create): Open's arguments.
type AddRefund struct {
	Invoice       Invoice
	By            string
	MerchantID    string
	RefundID      int64
	Amount        money.Amount
	Reason        string
	ReasonDetails string
	At            time.Time
}

// MoveRefund is a cancel, take or settle of one of the book's refunds: Move's
// arguments.
type MoveRefund struct {
	RefundID   int64
	Cmd        string
	Report     string
	By         string
	Resolution string
	Txn        string
	At         time.Time
}

// Moved is what a MoveRefund did: the refund before and after, and the rule whose
// Money the caller carries out.
type Moved struct {
	Before, After Refund
	Rule          Rule
}

// ErrUnchanged answers a move the table allows that changes nothing (a repeated
// take): it is no refusal of the command, but the book is not written again.
var ErrUnchanged = errors.New("refund unchanged")

// Step is the book's transition: AddRefund says the new Refund, MoveRefund says
// Moved. A refusal (Open's and Move's errors, ErrUnchanged) leaves the book as it
// was.
func Step(b Book, msg any) (Book, any, error) {
	switch m := msg.(type) {
	case AddRefund:
		nb, r, err := Open(b, m.Invoice, m.By, m.MerchantID, m.RefundID, m.Amount, m.Reason, m.ReasonDetails, m.At)
		if err != nil {
			return b, nil, err
		}
		return nb, r, nil
	case MoveRefund:
		nb, before, after, rule, err := Move(b, m.RefundID, m.Cmd, m.Report, m.By, m.Resolution, m.Txn, m.At)
		if err != nil {
			return b, nil, err
		}
		if rule.Money == MoneyNone && after.State() == before.State() && after.TakenAt.Equal(before.TakenAt) {
			return b, nil, ErrUnchanged
		}
		return nb, Moved{Before: before, After: after, Rule: rule}, nil
	}
	return b, nil, fmt.Errorf("%w: unknown message %T", ErrInvalid, msg)
}
