package wallet

import (
	"time"

	"paysvc/actors/values/money"
)

// Wallet types. SETTLEMENT wallets are created by the service, one per merchant and
// currency; WORKING wallets by the merchant.
const (
	TypeSettlement = "SETTLEMENT"
	TypeWorking    = "WORKING"
)

// Currencies a wallet can hold (money.Currencies).
var Currencies = money.Currencies

// State is one wallet's snapshot. Version increases by one with every applied change
// and is the optimistic check of the engine's snapshot UPDATE.
type State struct {
	WalletID         string       `db:"wallet_id" json:"wallet_id"`
	MerchantID       string       `db:"merchant_id" json:"merchant_id"`
	Currency         string       `db:"currency" json:"currency"`
	WalletType       string       `db:"wallet_type" json:"wallet_type"`
	Label            string       `db:"label" json:"label"`
	CanDisburse      bool         `db:"can_disburse" json:"can_disburse"`
	CurrentBalance   money.Amount `db:"current_balance" json:"current_balance"`
	AvailableBalance money.Amount `db:"available_balance" json:"available_balance"`
	Version          int64        `db:"version" json:"version"`
	CreatedAt        time.Time    `db:"created_at" json:"created_at"`
	UpdatedAt        time.Time    `db:"updated_at" json:"updated_at"`
}

// Exists reports whether the state is a real wallet (Version 0 means never opened).
func (s State) Exists() bool { return s.Version > 0 }

// View is the Wallet resource as merchants see it: the snapshot without the
// engine's bookkeeping (merchant id, version).
type View struct {
	WalletID         string       `json:"wallet_id"`
	Label            string       `json:"label"`
	CanDisburse      bool         `json:"can_disburse"`
	Currency         string       `json:"currency"`
	WalletType       string       `json:"wallet_type"`
	CurrentBalance   money.Amount `json:"current_balance"`
	AvailableBalance money.Amount `json:"available_balance"`
	CreatedAt        time.Time    `json:"created_at"`
	UpdatedAt        time.Time    `json:"updated_at"`
}

// View returns the merchant-facing view of the wallet.
func (s State) View() View {
	return View{WalletID: s.WalletID, Label: s.Label, CanDisburse: s.CanDisburse, Currency: s.Currency,
		WalletType: s.WalletType, CurrentBalance: s.CurrentBalance, AvailableBalance: s.AvailableBalance,
		CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
}
