package refund

import (
	"errors"
	"testing"
	"time"

	"paysvc/actors/money"
)

var all = []string{StatusPending, StatusCompleted, StatusCancelled, StatusDisputed, StatusOverdue}

// Every pair of statuses: only the documented moves (docs/state-machines.md).
func TestTransitions(t *testing.T) {
	allowed := map[[2]string]bool{
		{StatusPending, StatusCompleted}: true, {StatusPending, StatusCancelled}: true, {StatusPending, StatusDisputed}: true,
		{StatusPending, StatusOverdue}: true, {StatusDisputed, StatusCompleted}: true, {StatusDisputed, StatusCancelled}: true,
		{StatusOverdue, StatusCompleted}: true, {StatusOverdue, StatusCancelled}: true,
	}
	for _, from := range all {
		for _, to := range all {
			if got := CanMove(from, to); got != allowed[[2]string{from, to}] {
				t.Errorf("CanMove(%s, %s) = %v", from, to, got)
			}
		}
	}
}

func TestOpenLimitsAndCopies(t *testing.T) {
	at := time.Now()
	inv := Invoice{InvoiceID: "I1", State: "COMPLETE", Currency: "KES", Value: money.MustParse("10.00"), WalletID: "W1"}
	b, _, err := Open(Book{}, inv, "M1", 1, money.MustParse("6.00"), "Other", "", at)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(b, inv, "M1", 2, money.MustParse("4.01"), "Other", "", at); !errors.Is(err, ErrExceeds) {
		t.Fatalf("over the value: %v", err)
	}
	b2, _, err := Open(b, inv, "M1", 2, money.MustParse("4.00"), "Other", "", at)
	if err != nil || len(b.Refunds) != 1 || len(b2.Refunds) != 2 {
		t.Fatalf("exactly the value: %v; the old book changed: %d", err, len(b.Refunds))
	}
	b3, _, _, err := Move(b2, 1, StatusCancelled, "", "", at)
	if err != nil || b2.Refunds[0].Status != StatusPending {
		t.Fatalf("cancel: %v; the old book changed: %s", err, b2.Refunds[0].Status)
	}
	if !b3.Committed().Equal(money.MustParse("4.00")) {
		t.Fatalf("committed after a cancel: %s", b3.Committed())
	}
	if _, _, err := Open(b3, inv, "M1", 3, money.MustParse("1"), "UNAVAIBLE", "", at); !errors.Is(err, ErrInvalid) {
		t.Fatalf("reason outside the enum: %v", err)
	}
	pending := inv
	pending.State = "PENDING"
	if _, _, err := Open(Book{}, pending, "M1", 4, money.MustParse("1"), "Other", "", at); !errors.Is(err, ErrNotRefundable) {
		t.Fatalf("pending invoice: %v", err)
	}
}
