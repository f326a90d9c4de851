package wallet

import (
	"time"

	"paysvc/actors/money"
)

// Wallet types. SETTLEMENT wallets are created by the service, one per merchant and
// currency; WORKING wallets by the merchant.
const (
	TypeSettlement = "SETTLEMENT"
	TypeWorking    = "WORKING"
)

// Currencies a wallet can hold.
var Currencies = map[string]bool{"KES": true, "USD": true, "EUR": true, "GBP": true}

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
