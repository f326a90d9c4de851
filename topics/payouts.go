package topics

import (
	"encoding/json"
	"time"

	"paysvc/actors/values/ids"
	"paysvc/actors/values/money"
)

// Payout command types on paysvc.commands.v1. A payment file is one aggregate; its
// transactions live inside it and move only through these commands.
const (
	CmdPayoutInitiate = "payout.initiate"
	CmdPayoutApprove  = "payout.approve"
	CmdPayoutCancel   = "payout.cancel"
	// CmdPayoutResults carries a rail's outcomes for some of a file's transactions.
	// Its id is derived from the file, the stage and the rail's batch label, so a
	// repeated report applies once; and a transaction already final ignores any
	// later outcome, so even a differently grouped repeat moves no money twice.
	CmdPayoutResults = "payout.results"
	// CmdPayoutP2PCredit credits another merchant's wallet with a P2P (INTASEND)
	// payout. It is keyed by the recipient merchant, so it runs in the recipient's
	// partition; its outcome returns to the payer's file as a payout.results.
	CmdPayoutP2PCredit = "payout.p2p_credit"
	// CmdPayoutHold, CmdPayoutRelease and CmdPayoutFail are an operator's
	// commands on a file being paid (paysvc payout hold|release|fail): hold its
	// unsent transactions, send them again, or fail them and release their hold.
	// Payload PayoutOperator.
	CmdPayoutHold    = "payout.hold"
	CmdPayoutRelease = "payout.release"
	CmdPayoutFail    = "payout.fail"
)

// PayoutOperator is the payload of CmdPayoutHold, CmdPayoutRelease and
// CmdPayoutFail. By and Reason go into the file's audit; Reason is required to
// fail, and is shown to the merchant then.
type PayoutOperator struct {
	FileID string `json:"file_id"`
	// By names the operator who gave the command (the CLI's --by, default the
	// operating-system user).
	By     string `json:"by"`
	Reason string `json:"reason,omitempty"`
}

// RailsPayoutTopic carries payout requests from the engine's outbox to the rails
// role: one record per chunk of a file's transactions (at most PayoutChunk), keyed
// by the file so one file's chunks keep their order. Internal: not a webhook topic.
const RailsPayoutTopic = "paysvc.rails.payout.v1"

// PayoutChunk is the most transactions one rail request (and one result command)
// carries: large enough that a 10,000-transaction file is a few dozen commands,
// small enough that one command's batch stays a few hundred kilobytes.
const PayoutChunk = 500

// Payout result stages.
const (
	PayoutStageSubmitted = "SUBMITTED" // the rail took the transactions: PENDING -> PROCESSING
	PayoutStageFinal     = "FINAL"     // COMPLETE or FAILED
)

// PayoutTxnIn is one transaction of a payout.initiate, validated by the API.
type PayoutTxnIn struct {
	TransactionID      string       `json:"transaction_id"`
	RequestReferenceID string       `json:"request_reference_id"`
	Account            string       `json:"account"`
	Amount             money.Amount `json:"amount"`
	// Charge is not read, and the API leaves it zero: the payout aggregate prices
	// each transaction when it opens the file, so what a payout costs is never a
	// command's producer's to say. The field stays in the schema because commands
	// already in the log carry a charge: they decode as written, and applying one
	// prices it by the aggregate like any other.
	Charge           money.Amount `json:"charge"`
	Name             string       `json:"name,omitempty"`
	IDNumber         string       `json:"id_number,omitempty"`
	CategoryName     string       `json:"category_name,omitempty"`
	Narrative        string       `json:"narrative,omitempty"`
	AccountType      string       `json:"account_type,omitempty"`
	AccountReference string       `json:"account_reference,omitempty"`
	BankCode         string       `json:"bank_code,omitempty"`
	IdempotencyKey   string       `json:"idempotency_key,omitempty"`
	// RecipientMerchantID is, for P2P, the merchant owning the destination wallet
	// (Account); the API looks it up so the credit can be keyed to that merchant.
	RecipientMerchantID string `json:"recipient_merchant_id,omitempty"`
	// RecipientWalletID is, for P2P, the wallet Account resolved to when Account
	// is not a wallet id itself (a merchant's email: its settlement wallet of the
	// file's currency). Internal: the payer sees Account as it wrote it.
	RecipientWalletID string `json:"recipient_wallet_id,omitempty"`
}

// PayoutInitiate opens a payment file.
type PayoutInitiate struct {
	FileID           string        `json:"file_id"`
	TrackingID       string        `json:"tracking_id"`
	Nonce            string        `json:"nonce"`
	WalletID         string        `json:"wallet_id,omitempty"` // empty: the settlement wallet of Currency
	Provider         string        `json:"provider"`
	Currency         string        `json:"currency"`
	RequiresApproval bool          `json:"requires_approval"`
	BatchReference   string        `json:"batch_reference,omitempty"`
	DeviceID         string        `json:"device_id,omitempty"`
	CallbackURL      string        `json:"callback_url,omitempty"`
	Transactions     []PayoutTxnIn `json:"transactions"`
}

// PayoutApprove approves a file waiting for approval. Nonce, when not empty, must
// match the file's.
type PayoutApprove struct {
	FileID     string `json:"file_id,omitempty"`
	TrackingID string `json:"tracking_id,omitempty"`
	Nonce      string `json:"nonce,omitempty"`
}

// PayoutCancel cancels a file waiting for approval.
type PayoutCancel struct {
	FileID string `json:"file_id"`
}

// PayoutRailTxn is one transaction as a rail needs it.
type PayoutRailTxn struct {
	TransactionID    string       `json:"transaction_id"`
	Account          string       `json:"account"`
	Amount           money.Amount `json:"amount"`
	Name             string       `json:"name,omitempty"`
	IDNumber         string       `json:"id_number,omitempty"`
	Narrative        string       `json:"narrative,omitempty"`
	AccountType      string       `json:"account_type,omitempty"`
	AccountReference string       `json:"account_reference,omitempty"`
	BankCode         string       `json:"bank_code,omitempty"`
}

// PayoutRailRequest is a record of RailsPayoutTopic.
type PayoutRailRequest struct {
	FileID       string          `json:"file_id"`
	MerchantID   string          `json:"merchant_id"`
	Provider     string          `json:"provider"`
	Currency     string          `json:"currency"`
	Chunk        int             `json:"chunk"`
	Transactions []PayoutRailTxn `json:"transactions"`
}

// PayoutTxnResult is a rail's outcome for one transaction.
type PayoutTxnResult struct {
	TransactionID string `json:"transaction_id"`
	// Success is meaningful at the FINAL stage only.
	Success             bool   `json:"success"`
	Description         string `json:"description,omitempty"`
	ProviderReference   string `json:"provider_reference,omitempty"`
	ProviderAccountName string `json:"provider_account_name,omitempty"`
}

// PayoutResults is the payload of CmdPayoutResults. Batch labels the group of
// outcomes within the stage (the rail's chunk and outcome group); with FileID and
// Stage it derives the command id.
type PayoutResults struct {
	FileID string `json:"file_id"`
	// MerchantID is the payer (the rail request's MerchantID): the command is
	// keyed by it, so the outcome reaches the partition that owns the file.
	MerchantID string            `json:"merchant_id"`
	Stage      string            `json:"stage"`
	Batch      string            `json:"batch"`
	Results    []PayoutTxnResult `json:"results"`
}

// PayoutP2PCredit is the payload of CmdPayoutP2PCredit.
type PayoutP2PCredit struct {
	PayerMerchantID string `json:"payer_merchant_id"`
	FileID          string `json:"file_id"`
	TransactionID   string `json:"transaction_id"`
	WalletID        string `json:"wallet_id"` // the recipient's wallet
	// Account is the recipient as the payer named it (a wallet id or an email):
	// outcome descriptions, which the payer reads, name it and never the wallet
	// an email resolved to. Empty in commands queued before it existed: WalletID.
	Account   string       `json:"account,omitempty"`
	Amount    money.Amount `json:"amount"`
	Currency  string       `json:"currency"`
	Narrative string       `json:"narrative,omitempty"`
}

// SendMoney is the payload of a send_money_event: the file at the time of the
// change, with the fields the spec shows plus the amounts a consumer reconciles on.
type SendMoney struct {
	ID         string `json:"id"`
	FileID     string `json:"file_id"`
	TrackingID string `json:"tracking_id"`
	// State is in the events' own vocabulary, which differs from the status
	// endpoint's (the spec): PREVIEW-AND-APPROVE, PENDING, PROCESSED, CANCELLED or
	// FAILED (see SendMoneyState).
	State string `json:"state"`
	// Status and StatusCode are the status endpoint's words for the same moment
	// (PROCESSING, COMPLETE, ...; BP109, BC100, ...).
	Status            string  `json:"status"`
	StatusCode        string  `json:"status_code"`
	Provider          string  `json:"provider"`
	Currency          string  `json:"currency"`
	TotalAmount       string  `json:"total_amount"`
	ChargeEstimate    string  `json:"charge_estimate"`
	PaidAmount        string  `json:"paid_amount"`
	FailedAmount      string  `json:"failed_amount"`
	ActualCharges     string  `json:"actual_charges"`
	TransactionsCount int     `json:"transactions_count"`
	BatchReference    *string `json:"batch_reference"`
	FailedReason      *string `json:"failed_reason"`
	// OnHold: an operator holds the file (its unsent transactions wait).
	OnHold bool `json:"on_hold"`
	// Operator is the operator's action this event reports (hold, release or
	// fail), null for any other change of the file.
	Operator  *SendMoneyOperator `json:"operator"`
	CreatedAt time.Time          `json:"created_at"`
	UpdatedAt time.Time          `json:"updated_at"`
}

// SendMoneyOperator is an operator's hold, release or fail of a file, as a
// send_money_event reports it: what was done, why, and when. Who did it stays
// in the file's audit, not in the merchant's event.
type SendMoneyOperator struct {
	// Action is HOLD, RELEASE or FAIL.
	Action string `json:"action"`
	Reason string `json:"reason"`
	// Failed is how many transactions a FAIL failed (0 otherwise).
	Failed int       `json:"failed"`
	At     time.Time `json:"at"`
}

// SendMoneyState is a file status in the vocabulary of send_money_event: a file being
// paid is PENDING (its outcomes are pending) and a finished one PROCESSED; the others
// keep their names.
func SendMoneyState(status string) string {
	switch status {
	case "PROCESSING":
		return "PENDING"
	case "COMPLETE":
		return "PROCESSED"
	}
	return status
}

// CallbackTopic carries the callback_url notifications of payment files from the
// engine's outbox to the dispatcher role, which signs and delivers them. Keyed by
// file, so one file's notifications keep their order. Internal: not a webhook topic.
const CallbackTopic = "paysvc.callbacks.v1"

// Callback is a record of CallbackTopic. Body is the exact bytes to POST; the
// signing key is the file's nonce, looked up by FileID when delivering (it never
// travels in a record).
type Callback struct {
	ID         string          `json:"id"`
	MerchantID string          `json:"merchant_id"`
	URL        string          `json:"url"`
	FileID     string          `json:"file_id"`
	OccurredAt time.Time       `json:"occurred_at"`
	Body       json.RawMessage `json:"body"`
}

// PayoutResultCommandID is the id of the command carrying one group of a rail's
// outcomes: the same group reported again is the same command.
func PayoutResultCommandID(fileID, stage, batch string) string {
	return ids.DeriveUUID("payout-result", fileID, stage, batch)
}
