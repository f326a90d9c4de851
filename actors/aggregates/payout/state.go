package payout

import (
	"slices"
	"time"

	"paysvc/actors/values/money"
)

// File statuses. The first four are the spec's. No step makes a file FAILED: an
// approval that cannot be funded is refused and leaves the file awaiting approval
// (docs/payouts.md). FAILED is a terminal status that files stored by versions
// which failed such a file still hold; they read and refuse commands as any
// terminal file.
const (
	StatusPreview    = "PREVIEW-AND-APPROVE"
	StatusProcessing = "PROCESSING"
	StatusComplete   = "COMPLETE"
	StatusCancelled  = "CANCELLED"
	StatusFailed     = "FAILED"
)

// File status codes (docs/compat.md; BF110 is paysvc's own, for a stored FAILED file).
const (
	CodeNew        = "BP101"
	CodeAwaiting   = "BP103"
	CodePaying     = "BP109"
	CodeCompleted  = "BC100"
	CodeCancelled  = "BE111"
	CodeFileFailed = "BF110"
)

// Transaction statuses and codes.
const (
	TxnPending    = "PENDING"
	TxnProcessing = "PROCESSING"
	TxnComplete   = "COMPLETE"
	TxnFailed     = "FAILED"

	TxnCodeNew       = "TP101"
	TxnCodeStarted   = "TP102"
	TxnCodeSuccess   = "TS100"
	TxnCodeFailed    = "TF106"
	TxnCodeCancelled = "TC108"
)

// Providers. INTASEND is what the official SDKs send for P2P; the API maps it.
const (
	ProviderB2C      = "MPESA-B2C"
	ProviderB2B      = "MPESA-B2B"
	ProviderPesalink = "PESALINK"
	ProviderP2P      = "P2P"
	ProviderAirtime  = "AIRTIME"
	ProviderRTGS     = "RTGS"
)

// Providers lists the payout providers.
var Providers = []string{ProviderB2C, ProviderB2B, ProviderPesalink, ProviderP2P, ProviderAirtime, ProviderRTGS}

// fileTransitions is the file state machine; a test walks every pair.
var fileTransitions = map[string][]string{
	// requires_approval NO goes through PREVIEW-AND-APPROVE and approval inside
	// the one command that creates the file: only PROCESSING (or COMPLETE) is seen.
	"": {StatusPreview},
	// COMPLETE at approval when every transaction was refused (idempotency keys
	// already paid): nothing is left to pay.
	StatusPreview:    {StatusProcessing, StatusComplete, StatusCancelled},
	StatusProcessing: {StatusComplete},
	StatusComplete:   {},
	StatusCancelled:  {},
	StatusFailed:     {}, // legacy: see above
}

// txnTransitions is the transaction state machine.
var txnTransitions = map[string][]string{
	// PENDING -> FAILED only by approval (refused) or an operator's fail
	// (Operator, ActionFail): a rail's outcome needs the transaction submitted
	// (PROCESSING) first.
	TxnPending:    {TxnProcessing, TxnFailed},
	TxnProcessing: {TxnComplete, TxnFailed},
	TxnComplete:   {},
	TxnFailed:     {},
}

// CanMove reports whether the file machine allows from -> to.
func CanMove(from, to string) bool { return slices.Contains(fileTransitions[from], to) }

// CanMoveTxn reports whether the transaction machine allows from -> to.
func CanMoveTxn(from, to string) bool { return slices.Contains(txnTransitions[from], to) }

// Txn is one transaction of a file.
type Txn struct {
	TransactionID       string       `json:"transaction_id"`
	RequestReferenceID  string       `json:"request_reference_id"`
	Account             string       `json:"account"`
	Amount              money.Amount `json:"amount"`
	Charge              money.Amount `json:"charge"`
	Name                string       `json:"name,omitempty"`
	IDNumber            string       `json:"id_number,omitempty"`
	CategoryName        string       `json:"category_name,omitempty"`
	Narrative           string       `json:"narrative,omitempty"`
	AccountType         string       `json:"account_type,omitempty"`
	AccountReference    string       `json:"account_reference,omitempty"`
	BankCode            string       `json:"bank_code,omitempty"`
	IdempotencyKey      string       `json:"idempotency_key,omitempty"`
	RecipientMerchantID string       `json:"recipient_merchant_id,omitempty"`
	RecipientWalletID   string       `json:"recipient_wallet_id,omitempty"` // P2P to an email: the wallet it named
	Status              string       `json:"status"`
	StatusCode          string       `json:"status_code"`
	StatusDescription   string       `json:"status_description,omitempty"`
	ProviderReference   string       `json:"provider_reference,omitempty"`
	ProviderAccountName string       `json:"provider_account_name,omitempty"`
	CreatedAt           time.Time    `json:"created_at"`
	UpdatedAt           time.Time    `json:"updated_at"`
}

// Operator actions on a file being paid.
const (
	ActionHold    = "HOLD"
	ActionRelease = "RELEASE"
	ActionFail    = "FAIL"
)

// OperatorAction is one operator command that changed a file, as its audit keeps it.
type OperatorAction struct {
	Action    string    `json:"action"`
	By        string    `json:"by"`
	Reason    string    `json:"reason,omitempty"`
	CommandID string    `json:"command_id,omitempty"`
	Failed    int       `json:"failed,omitempty"` // FAIL: how many transactions it failed
	At        time.Time `json:"at"`
}

// LastAction is the file's latest operator action, or nil.
func (h Header) LastAction() *OperatorAction {
	if len(h.OperatorActions) == 0 {
		return nil
	}
	a := h.OperatorActions[len(h.OperatorActions)-1]
	return &a
}

// Final reports whether the transaction has its outcome.
func (t Txn) Final() bool { return t.Status == TxnComplete || t.Status == TxnFailed }

// Header is a file without its transactions: what the files table stores as JSON
// (transactions are rows of their own, so a result touching 500 of 10,000
// transactions writes 500 rows, not the whole file).
type Header struct {
	FileID           string `json:"file_id"`
	TrackingID       string `json:"tracking_id"`
	Nonce            string `json:"nonce"`
	MerchantID       string `json:"merchant_id"`
	WalletID         string `json:"wallet_id"`
	Provider         string `json:"provider"`
	Currency         string `json:"currency"`
	Status           string `json:"status"`
	StatusCode       string `json:"status_code"`
	RequiresApproval bool   `json:"requires_approval"`
	BatchReference   string `json:"batch_reference,omitempty"`
	DeviceID         string `json:"device_id,omitempty"`
	CallbackURL      string `json:"callback_url,omitempty"`
	FailedReason     string `json:"failed_reason,omitempty"`
	// OnHold: an operator held the file (paysvc payout hold): its unsent
	// transactions are not sent until it is released. Transactions a rail has
	// (PROCESSING) still take their outcome.
	OnHold bool `json:"on_hold,omitempty"`
	// FailedByOperator: an operator failed the file's unsent transactions
	// (paysvc payout fail); FailedReason says why.
	FailedByOperator bool `json:"failed_by_operator,omitempty"`
	// OperatorActions is the file's audit of operator commands, oldest first:
	// who held, released or failed it, when, why, and by which command.
	OperatorActions []OperatorAction `json:"operator_actions,omitempty"`
	TotalAmount     money.Amount     `json:"total_amount"`
	ChargeEstimate  money.Amount     `json:"charge_estimate"`
	// Held is what the file still holds in its wallet: total plus charges at
	// approval, down by each outcome, zero at COMPLETE.
	Held          money.Amount `json:"held"`
	PaidAmount    money.Amount `json:"paid_amount"`
	FailedAmount  money.Amount `json:"failed_amount"`
	ActualCharges money.Amount `json:"actual_charges"`
	Finished      int          `json:"finished"` // transactions with their outcome
	Count         int          `json:"transactions_count"`
	Version       int64        `json:"version"`
	CreatedAt     time.Time    `json:"created_at"`
	UpdatedAt     time.Time    `json:"updated_at"`
}

// State is one file: its header and its transactions in file order.
type State struct {
	Header
	Txns []Txn `json:"transactions"`
}

// Exists reports whether the state is a real file.
func (s State) Exists() bool { return s.Version > 0 }

// Index returns the position of each transaction id.
func (s State) Index() map[string]int {
	m := make(map[string]int, len(s.Txns))
	for i, t := range s.Txns {
		m[t.TransactionID] = i
	}
	return m
}
