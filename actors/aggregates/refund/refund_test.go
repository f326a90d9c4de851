package refund

import (
	"errors"
	"testing"
	"time"

	"paysvc/actors/values/money"
)

func TestOpenLimitsAndCopies(t *testing.T) {
	at := time.Now()
	inv := Invoice{InvoiceID: "I1", State: "COMPLETE", Currency: "KES", Value: money.MustParse("10.00"), WalletID: "W1"}
	b, _, err := Open(Book{}, inv, ByMerchant, "M1", 1, money.MustParse("6.00"), "Other", "", at)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(b, inv, ByMerchant, "M1", 2, money.MustParse("4.01"), "Other", "", at); !errors.Is(err, ErrExceeds) {
		t.Fatalf("over the value: %v", err)
	}
	b2, _, err := Open(b, inv, ByMerchant, "M1", 2, money.MustParse("4.00"), "Other", "", at)
	if err != nil || len(b.Refunds) != 1 || len(b2.Refunds) != 2 {
		t.Fatalf("exactly the value: %v; the old book changed: %d", err, len(b.Refunds))
	}
	b3, _, _, _, err := Move(b2, 1, CmdCancel, "", ByMerchant, "", "", at)
	if err != nil || b2.Refunds[0].Status != StatusPending {
		t.Fatalf("cancel: %v; the old book changed: %s", err, b2.Refunds[0].Status)
	}
	if !b3.Committed().Equal(money.MustParse("4.00")) {
		t.Fatalf("committed after a cancel: %s", b3.Committed())
	}
	if _, _, err := Open(b3, inv, ByMerchant, "M1", 3, money.MustParse("1"), "UNAVAIBLE", "", at); !errors.Is(err, ErrInvalid) {
		t.Fatalf("reason outside the enum: %v", err)
	}
	pending := inv
	pending.State = "PENDING"
	if _, _, err := Open(Book{}, pending, ByMerchant, "M1", 4, money.MustParse("1"), "Other", "", at); !errors.Is(err, ErrNotRefundable) {
		t.Fatalf("pending invoice: %v", err)
	}
}
