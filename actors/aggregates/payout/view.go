package payout

import (
	"time"

	"paysvc/actors/aggregates/wallet"
	"paysvc/actors/values/money"
)

// TxnView is a transaction as merchants see it (the spec's Send-money transaction).
type TxnView struct {
	TransactionID       string       `json:"transaction_id"`
	Account             string       `json:"account"`
	Amount              money.Amount `json:"amount"`
	Name                string       `json:"name"`
	IDNumber            string       `json:"id_number"`
	CategoryName        string       `json:"category_name"`
	Narrative           string       `json:"narrative"`
	AccountReference    string       `json:"account_reference"`
	AccountType         string       `json:"account_type"`
	BankCode            string       `json:"bank_code"`
	Provider            string       `json:"provider"`
	Status              string       `json:"status"`
	StatusCode          string       `json:"status_code"`
	StatusDescription   string       `json:"status_description"`
	RequestReferenceID  string       `json:"request_reference_id"`
	ProviderReference   *string      `json:"provider_reference"`
	ProviderAccountName *string      `json:"provider_account_name"`
	Charge              money.Amount `json:"charge"`
	Currency            string       `json:"currency"`
	IdempotencyKey      *string      `json:"idempotency_key"`
	FileID              string       `json:"file_id"`
	CreatedAt           time.Time    `json:"created_at"`
	UpdatedAt           time.Time    `json:"updated_at"`
}

// FileView is a file as merchants see it (the spec's Send-money file). Nonce is
// empty where the view must not carry it (callbacks, which it signs).
type FileView struct {
	FileID              string       `json:"file_id"`
	TrackingID          string       `json:"tracking_id"`
	DeviceID            string       `json:"device_id"`
	BatchReference      string       `json:"batch_reference"`
	Status              string       `json:"status"`
	StatusCode          string       `json:"status_code"`
	Nonce               string       `json:"nonce,omitempty"`
	Provider            string       `json:"provider"`
	Currency            string       `json:"currency"`
	RequiresApproval    string       `json:"requires_approval"`
	CallbackURL         *string      `json:"callback_url"`
	Wallet              *wallet.View `json:"wallet,omitempty"`
	ChargeEstimate      money.Amount `json:"charge_estimate"`
	TotalAmountEstimate money.Amount `json:"total_amount_estimate"`
	TotalAmount         money.Amount `json:"total_amount"`
	TransactionsCount   int          `json:"transactions_count"`
	ActualCharges       money.Amount `json:"actual_charges"`
	PaidAmount          money.Amount `json:"paid_amount"`
	FailedAmount        money.Amount `json:"failed_amount"`
	FailedReason        *string      `json:"failed_reason"`
	Transactions        []TxnView    `json:"transactions"`
	CreatedAt           time.Time    `json:"created_at"`
	UpdatedAt           time.Time    `json:"updated_at"`
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ViewTxn is one transaction of the file as merchants see it.
func (s State) ViewTxn(t Txn) TxnView {
	return TxnView{TransactionID: t.TransactionID, Account: t.Account, Amount: t.Amount, Name: t.Name, IDNumber: t.IDNumber,
		CategoryName: t.CategoryName, Narrative: t.Narrative, AccountReference: t.AccountReference, AccountType: t.AccountType,
		BankCode: t.BankCode, Provider: s.Provider, Status: t.Status, StatusCode: t.StatusCode, StatusDescription: t.StatusDescription,
		RequestReferenceID: t.RequestReferenceID, ProviderReference: optional(t.ProviderReference),
		ProviderAccountName: optional(t.ProviderAccountName), Charge: t.Charge, Currency: s.Currency,
		IdempotencyKey: optional(t.IdempotencyKey), FileID: s.FileID, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt}
}

// View is the file as merchants see it, with the given transactions (all of them
// when txns is nil) and its wallet when w is not nil.
func (s State) View(w *wallet.View, txns []Txn) FileView {
	if txns == nil {
		txns = s.Txns
	}
	approval := "YES"
	if !s.RequiresApproval {
		approval = "NO"
	}
	v := FileView{FileID: s.FileID, TrackingID: s.TrackingID, DeviceID: s.DeviceID, BatchReference: s.BatchReference,
		Status: s.Status, StatusCode: s.StatusCode, Nonce: s.Nonce, Provider: s.Provider, Currency: s.Currency,
		RequiresApproval: approval, CallbackURL: optional(s.CallbackURL), Wallet: w,
		ChargeEstimate: s.ChargeEstimate, TotalAmountEstimate: s.TotalAmount.Add(s.ChargeEstimate), TotalAmount: s.TotalAmount,
		TransactionsCount: s.Count, ActualCharges: s.ActualCharges, PaidAmount: s.PaidAmount, FailedAmount: s.FailedAmount,
		FailedReason: optional(s.FailedReason), Transactions: make([]TxnView, len(txns)), CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
	for i, t := range txns {
		v.Transactions[i] = s.ViewTxn(t)
	}
	return v
}
