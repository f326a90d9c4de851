package engine

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"paysvc/actors/values/ledger"
	"paysvc/actors/values/money"
	"paysvc/storage"
)

// countMoney books, in exact cents, only the entries on the system accounts: what
// came into the wallets (the system side negative), what left (positive) and the
// fees; the wallets' own entries and zero amounts count nothing. XTS is ISO's
// currency for tests: no other test of the package moves it.
func TestCountMoney(t *testing.T) {
	entry := func(account, amount string) storage.EntryWrite {
		return storage.EntryWrite{Entry: ledger.Entry{Account: account, Currency: "XTS", Amount: money.MustParse(amount)}}
	}
	in := func(rail string) float64 { return testutil.ToFloat64(moneyIn.WithLabelValues("XTS", rail)) }
	out := func(rail string) float64 { return testutil.ToFloat64(moneyOut.WithLabelValues("XTS", rail)) }
	fees := func() float64 { return testutil.ToFloat64(moneyFees.WithLabelValues("XTS")) }
	inM, inS, outP, outR, f := in("mpesa"), in("sandbox_funding"), out("p2p"), out("refunds"), fees()

	countMoney([]storage.EntryWrite{
		entry(ledger.WalletAccount("W1"), "99.48"), // the wallet's side: not counted
		entry(ledger.MpesaClearing, "-101.00"),     // a collection of 101.00
		entry(ledger.Fees, "1.52"),
		entry(ledger.P2PClearing, "0.01"), // two payouts of a cent, summed exactly
		entry(ledger.P2PClearing, "0.01"),
		entry(ledger.SandboxFunding, "-0.10"),
		entry(ledger.RefundsClearing, "0.00"),
		entry(ledger.RefundsClearing, "12345678901.99"),
	})
	for name, c := range map[string][2]float64{
		"in mpesa":           {in("mpesa") - inM, 10100},
		"in sandbox_funding": {in("sandbox_funding") - inS, 10},
		"out p2p":            {out("p2p") - outP, 2},
		"out refunds":        {out("refunds") - outR, 1234567890199},
		"fees":               {fees() - f, 152},
	} {
		if c[0] != c[1] {
			t.Errorf("%s moved by %v, want %v", name, c[0], c[1])
		}
	}
	if out("mpesa") != 0 || in("p2p") != 0 {
		t.Errorf("a direction moved that nothing went in: out mpesa %v, in p2p %v", out("mpesa"), in("p2p"))
	}
}
