package refund

import (
	"errors"
	"testing"
	"time"
)

// A step that changes nothing, or that is refused, leaves the book as it was, so
// the engine writes nothing; a change says what it did.
func TestStepOutcomes(t *testing.T) {
	at := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	taken := refundIn(StateTaken, at.Add(-time.Hour))
	if n, out, err := Step(taken, MoveRefund{RefundID: 7, Cmd: CmdTake, By: ByRail, At: at}); !errors.Is(err, ErrUnchanged) ||
		out != nil || !sameRefunds(n, taken) {
		t.Fatalf("a repeated take: %v, %v", err, out)
	}
	if _, _, err := Step(taken, Take{RefundID: 7, InvoiceID: "I1"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a payload is no message: %v", err)
	}
	n, out, err := Step(taken, MoveRefund{RefundID: 7, Cmd: CmdSettle, Report: StatusCompleted, By: ByRail, Txn: "TXN", At: at})
	m, ok := out.(Moved)
	if err != nil || !ok || m.Rule.Money != MoneyDebit || m.Before.State() != StateTaken || m.After.Status != StatusCompleted ||
		n.Refunds[0].Status != StatusCompleted || taken.Refunds[0].State() != StateTaken {
		t.Fatalf("settle: %v, %+v", err, out)
	}
}
