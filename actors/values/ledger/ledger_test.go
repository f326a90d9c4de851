package ledger_test

import (
	"errors"
	"testing"

	"paysvc/actors/values/ledger"
	"paysvc/actors/values/money"
)

func e(currency, amount string) ledger.Entry {
	return ledger.Entry{Currency: currency, Amount: money.MustParse(amount), Account: "a"}
}

func TestBalanced(t *testing.T) {
	t.Parallel()

	t.Run("Empty_IsBalanced", func(t *testing.T) {
		t.Parallel()
		if err := ledger.Balanced(nil); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("OneCurrencySumsToZero", func(t *testing.T) {
		t.Parallel()
		if err := ledger.Balanced([]ledger.Entry{e("KES", "10.00"), e("KES", "-7.50"), e("KES", "-2.50")}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("EachCurrencyBalancedSeparately", func(t *testing.T) {
		t.Parallel()
		if err := ledger.Balanced([]ledger.Entry{e("KES", "10.00"), e("USD", "3.00"), e("KES", "-10.00"), e("USD", "-3.00")}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("CrossCurrencyDoesNotCancel", func(t *testing.T) {
		t.Parallel()
		// Sums to zero overall, but not per currency.
		err := ledger.Balanced([]ledger.Entry{e("KES", "10.00"), e("USD", "-10.00")})
		var ue ledger.UnbalancedError
		if !errors.As(err, &ue) {
			t.Fatalf("err = %v, want UnbalancedError", err)
		}
		// Currencies are checked in sorted order: KES first.
		if ue.Currency != "KES" || !ue.Sum.Equal(money.MustParse("10.00")) {
			t.Fatalf("error data %+v", ue)
		}
	})

	t.Run("Unbalanced_ReportsCurrencyAndSum", func(t *testing.T) {
		t.Parallel()
		err := ledger.Balanced([]ledger.Entry{e("KES", "1.00"), e("KES", "-1.00"), e("USD", "5.00"), e("USD", "-4.99")})
		var ue ledger.UnbalancedError
		if !errors.As(err, &ue) {
			t.Fatalf("err = %v, want UnbalancedError", err)
		}
		if ue.Currency != "USD" || !ue.Sum.Equal(money.MustParse("0.01")) {
			t.Fatalf("error data %+v", ue)
		}
		if ue.Error() == "" {
			t.Fatal("empty error message")
		}
	})

	t.Run("SingleEntry_Unbalanced", func(t *testing.T) {
		t.Parallel()
		if err := ledger.Balanced([]ledger.Entry{e("EUR", "-0.01")}); err == nil {
			t.Fatal("a single non-zero entry was accepted")
		}
	})
}

func TestWalletAccount(t *testing.T) {
	t.Parallel()
	if got := ledger.WalletAccount("ABC"); got != "wallet:ABC" {
		t.Fatalf("WalletAccount = %q", got)
	}
	if ledger.WalletAccount("X") == ledger.SandboxFunding {
		t.Fatal("a wallet account collides with the sandbox funding account")
	}
}
