package topics

import "paysvc/actors/values/money"

// Wallet command types on paysvc.commands.v1 and their payloads.
const (
	CmdWalletCreate   = "wallet.create"
	CmdWalletDeposit  = "wallet.deposit"
	CmdWalletTransfer = "wallet.transfer"
)

// WalletCreate opens a WORKING wallet. WalletID is chosen by the API so a
// redelivered command opens the same wallet.
type WalletCreate struct {
	WalletID    string `json:"wallet_id"`
	Currency    string `json:"currency"`
	WalletType  string `json:"wallet_type"`
	Label       string `json:"label"`
	CanDisburse bool   `json:"can_disburse"`
}

// WalletDeposit funds a wallet from the sandbox funding account.
type WalletDeposit struct {
	WalletID  string       `json:"wallet_id"`
	Amount    money.Amount `json:"amount"`
	Narrative string       `json:"narrative"`
}

// WalletTransferCmd moves money between two wallets of the merchant.
type WalletTransferCmd struct {
	From      string       `json:"from_wallet_id"`
	To        string       `json:"to_wallet_id"`
	Amount    money.Amount `json:"amount"`
	Narrative string       `json:"narrative"`
}
