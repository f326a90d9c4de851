package ledger

import (
	"fmt"
	"sort"

	"paysvc/actors/values/money"
)

// System accounts: the other side of movements that enter or leave the merchant's
// wallets. They carry no snapshot row (a hot row would serialise every batch); their
// balance is the sum of their entries.
const (
	// SandboxFunding is where sandbox test deposits come from.
	SandboxFunding = "system:sandbox_funding"
	// MpesaClearing is what M-Pesa owes (collections) or is owed (payouts).
	MpesaClearing = "system:mpesa_clearing"
	// CardClearing is what the card acquirer owes for card collections.
	CardClearing = "system:card_clearing"
	// PesalinkClearing is what the banks owe for PesaLink collections.
	PesalinkClearing = "system:pesalink_clearing"
	// AirtimeClearing is what is owed to the airtime aggregator for airtime payouts.
	AirtimeClearing = "system:airtime_clearing"
	// RTGSClearing is what is owed to the banks for RTGS payouts.
	RTGSClearing = "system:rtgs_clearing"
	// P2PClearing carries wallet-to-wallet payouts between merchants: the
	// recipient's credit and the payer's payout each post against it (in two
	// partitions, so two transactions), and it nets to zero per completed payout.
	P2PClearing = "system:p2p_clearing"
	// RefundsClearing is what is owed to payers for completed refunds (the payer's
	// rail pays them back out of it).
	RefundsClearing = "system:refunds_clearing"
	// Fees is the service's fee income.
	Fees = "system:fees"
)

// WalletAccount is the ledger account of a wallet.
func WalletAccount(walletID string) string { return "wallet:" + walletID }

// Entry is one posting. Amount is signed from the account's point of view: positive
// increases the account's balance. RunningBalance is the wallet's current balance
// after this entry (nil for system accounts).
type Entry struct {
	TransactionID  string
	Account        string
	WalletID       string
	MerchantID     string
	Currency       string
	Amount         money.Amount
	RunningBalance *money.Amount
	TransType      string
	Narrative      string
}

// UnbalancedError says which currency does not sum to zero, and by how much.
type UnbalancedError struct {
	Currency string
	Sum      money.Amount
}

func (e UnbalancedError) Error() string {
	return fmt.Sprintf("ledger: entries in %s sum to %s, not 0.00", e.Currency, e.Sum)
}

// Balanced reports an UnbalancedError unless the entries sum to zero per currency.
func Balanced(entries []Entry) error {
	sums := map[string]money.Amount{}
	for _, e := range entries {
		sums[e.Currency] = sums[e.Currency].Add(e.Amount)
	}
	currencies := make([]string, 0, len(sums))
	for c := range sums {
		currencies = append(currencies, c)
	}
	sort.Strings(currencies)
	for _, c := range currencies {
		if !sums[c].IsZero() {
			return UnbalancedError{Currency: c, Sum: sums[c]}
		}
	}
	return nil
}
