package payoutkind

import (
	"testing"

	"paysvc/actors/aggregates/tariff"
	"paysvc/actors/values/money"
	"paysvc/topics"
)

// TestPriced: every transaction is charged by the schedule the kind runs with,
// whatever charge the command carries; a provider the schedule leaves out is
// charged its default, and a provider no schedule prices refuses the file.
func TestPriced(t *testing.T) {
	t.Parallel()
	own, err := tariff.ParseSchedule("PAYOUT-MPESA-B2C=0%+7.00")
	if err != nil {
		t.Fatal(err)
	}
	file := func(provider string, amounts ...string) *topics.PayoutInitiate {
		in := &topics.PayoutInitiate{Provider: provider}
		for _, a := range amounts {
			in.Transactions = append(in.Transactions, topics.PayoutTxnIn{TransactionID: "T" + a, Amount: money.MustParse(a),
				Charge: money.MustParse("999.00")})
		}
		return in
	}
	for _, tc := range []struct {
		name string
		fees *tariff.Schedule
		in   *topics.PayoutInitiate
		want []string
	}{
		{"own rule", own, file("MPESA-B2C", "100", "5000"), []string{"7.00", "7.00"}},
		{"left out: the default", own, file("PESALINK", "1000"), []string{"50.00"}},
		{"default schedule", tariff.DefaultSchedule(), file("MPESA-B2C", "100", "5000", "150000"), []string{"10.00", "50.00", "100.00"}},
		{"not positive: unpriced, for Create to refuse", own, file("MPESA-B2C", "0", "-1"), []string{"0.00", "0.00"}},
	} {
		txns, ok := priced(tc.fees, tc.in)
		if !ok || len(txns) != len(tc.want) {
			t.Fatalf("%s: %d transactions, ok %v", tc.name, len(txns), ok)
		}
		for i, x := range txns {
			if x.Charge.String() != tc.want[i] || !x.Amount.Equal(tc.in.Transactions[i].Amount) || x.TransactionID != tc.in.Transactions[i].TransactionID {
				t.Errorf("%s: transaction %d %s charged %s, want %s", tc.name, i, x.Amount, x.Charge, tc.want[i])
			}
		}
	}
	if _, ok := priced(own, file("PIGEON", "10")); ok {
		t.Error("a provider no schedule prices was priced")
	}
}
