package wallet

import (
	"errors"
	"fmt"
	"time"

	"paysvc/actors/values/ledger"
	"paysvc/actors/values/money"
)

// MaxTransfer is the largest intra-wallet transfer the interface allows.
var MaxTransfer = money.MustParse("999999.00")

// MaxBalance is the largest balance a wallet may hold: 15 integer digits, the most
// the strict money parser reads back, so a balance always round-trips through the
// API, stays within int64 cents, and is far below what the numeric(20,2) balance and
// ledger columns hold. A credit that would pass it is refused (ErrBalanceLimit) as a
// domain error, never left to fail in the database, where it would stall the batch.
var MaxBalance = money.MustParse("999999999999999.99")

// Open creates the wallet. It is refused if the wallet already exists.
type Open struct {
	WalletID    string
	MerchantID  string
	Currency    string
	WalletType  string
	Label       string
	CanDisburse bool
	At          time.Time
}

// Deposit credits the wallet from the sandbox funding account (sandbox only; the
// API refuses it on a live server).
type Deposit struct {
	MerchantID    string
	TransactionID string
	Amount        money.Amount
	Narrative     string
	At            time.Time
}

// TransferOut debits the source wallet of an intra-merchant transfer. Destination is
// the destination's snapshot, read by the engine just before, so the source can
// refuse a foreign, unknown or other-currency destination before any money moves.
type TransferOut struct {
	MerchantID    string
	TransactionID string
	Amount        money.Amount
	Narrative     string
	Destination   State
	At            time.Time
}

// TransferIn credits the destination wallet of an intra-merchant transfer.
type TransferIn struct {
	MerchantID    string
	TransactionID string
	Amount        money.Amount
	Narrative     string
	Origin        string
	Currency      string
	At            time.Time
}

// Collect credits the wallet with a completed collection: the provider's clearing
// account gives Value, the wallet gets NetAmount and the fees account Charges.
// Collected M-Pesa funds are cleared at once (both balances move).
type Collect struct {
	MerchantID     string
	TransactionID  string
	Value, Charges money.Amount
	NetAmount      money.Amount
	Clearing       string // the provider's clearing account, e.g. ledger.MpesaClearing
	Narrative      string
	// Uncleared funds count in current_balance only, until Release.
	Uncleared bool
	// TransType of the wallet's entry; default SALE (a P2P credit is P2P).
	TransType string
	At        time.Time
}

// Hold sets Amount of the available balance aside for a payment file (no ledger
// entry: the money is still the merchant's until each transaction is paid). It is
// refused if the available balance cannot cover it.
type Hold struct {
	MerchantID string
	Amount     money.Amount
	At         time.Time
}

// Disbursement is one paid payout transaction.
type Disbursement struct {
	TransactionID string
	Amount        money.Amount
	Charge        money.Amount
	Narrative     string
}

// Disburse pays payout transactions out of held funds: each leaves the wallet
// (amount plus charge), its amount goes to the rail's clearing account and its
// charge to the fees account. Held funds are already out of the available
// balance, so only the current balance moves.
type Disburse struct {
	MerchantID string
	Items      []Disbursement
	Clearing   string
	// TransType of the statement lines; default PAYOUT (a refund is REFUND).
	TransType string
	At        time.Time
}

// Release makes cleared collection funds available (no ledger entry: they were
// booked when collected; only their availability changes).
type Release struct {
	MerchantID string
	Amount     money.Amount
	At         time.Time
}

// Statement transaction types.
const (
	TransTypeDeposit  = "DEPOSIT"
	TransTypeTransfer = "TRANSFER"
	TransTypeSale     = "SALE"
	TransTypeCharge   = "CHARGE"
	TransTypePayout   = "PAYOUT"
	TransTypeP2P      = "P2P"
	TransTypeRefund   = "REFUND"
)

// Errors of Apply. The engine maps them to stable reply codes.
var (
	ErrNotFound         = errors.New("wallet not found")
	ErrNoDestination    = errors.New("destination wallet not found")
	ErrExists           = errors.New("wallet already exists")
	ErrCurrencyMismatch = errors.New("wallets have different currencies")
	ErrSameWallet       = errors.New("origin and destination are the same wallet")
	ErrInvalidAmount    = errors.New("amount must be greater than 0 and at most 999999.00")
	ErrInvalidWallet    = errors.New("invalid wallet definition")
	ErrBalanceLimit     = errors.New("the credit would take the wallet's balance past its maximum")
)

// InsufficientFundsError is returned when the available balance cannot cover a debit.
type InsufficientFundsError struct {
	WalletID  string
	Requested money.Amount
	Available money.Amount
}

func (e InsufficientFundsError) Error() string {
	return fmt.Sprintf("wallet %s: available balance %s is below the requested %s", e.WalletID, e.Available, e.Requested)
}

// Result is what Apply decides: the state after the command and its ledger entries.
type Result struct {
	State   State
	Entries []ledger.Entry
}

// TransferResult is the reply of a transfer: both wallets after it, as merchants
// see them (the API sends it as it is).
type TransferResult struct {
	Origin      View `json:"origin"`
	Destination View `json:"destination"`
}
