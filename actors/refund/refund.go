// Package refund is the refund (chargeback) aggregate: the pure part, with no
// engine or storage in it. Its instance is the refund book of one invoice: every
// refund of that invoice, so the rule "refunds never add up to more than the
// invoice collected" is checked against one state that the engine's partition
// (all of a merchant's commands, in order) changes one command at a time, also
// under concurrent requests. The engine wiring is in refundkind, the storage in
// storage/refunds.go, the table and its batch function in migration 0026.
package refund

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"paysvc/actors/money"
)

// Command types (registered by refundkind).
const (
	CmdCreate = "refund.create"
	CmdSettle = "refund.settle"
)

// Statuses (docs/state-machines.md). The public service shows these five.
const (
	StatusPending   = "PENDING"
	StatusCompleted = "COMPLETED"
	StatusCancelled = "CANCELLED"
	StatusDisputed  = "DISPUTED"
	StatusOverdue   = "OVERDUE"
)

// transitions is the state machine. The hold set aside at creation stays through
// DISPUTED and OVERDUE; COMPLETED pays it out, CANCELLED releases it.
var transitions = map[string][]string{
	StatusPending:  {StatusCompleted, StatusCancelled, StatusDisputed, StatusOverdue},
	StatusDisputed: {StatusCompleted, StatusCancelled},
	StatusOverdue:  {StatusCompleted, StatusCancelled},
}

// CanMove reports whether a refund may go from one status to the other.
func CanMove(from, to string) bool { return slices.Contains(transitions[from], to) }

// Reasons are the spec's enum, exactly.
var Reasons = []string{"Unavailable service", "Delayed delivery", "Wrong service", "Duplicate payment", "Other"}

// Limits (docs/api-decisions.md).
const (
	MaxPerInvoice    = 50  // refunds of one invoice, cancelled ones included
	MaxReasonDetails = 500 // characters
)

// Errors of Open and Move; refundkind maps them to replies.
var (
	ErrNotRefundable = errors.New("only COMPLETE invoices can be refunded")
	ErrExceeds       = errors.New("refunds would exceed the invoice value")
	ErrTooMany       = errors.New("too many refunds for one invoice")
	ErrNotFound      = errors.New("refund not found")
	ErrExists        = errors.New("refund id already used")
	ErrInvalid       = errors.New("invalid refund")
)

// Invoice is what a refund keeps of its invoice (the Refund resource's
// transaction object), copied when the book opens: a COMPLETE invoice does not change.
type Invoice struct {
	InvoiceID  string       `json:"invoice_id"`
	State      string       `json:"state"`
	Provider   string       `json:"provider"`
	Currency   string       `json:"currency"`
	Value      money.Amount `json:"value"`
	NetAmount  money.Amount `json:"net_amount"`
	Account    string       `json:"account"`
	APIRef     string       `json:"api_ref"`
	CheckoutID string       `json:"checkout_id,omitempty"`
	WalletID   string       `json:"wallet_id"`
	CreatedAt  time.Time    `json:"created_at"`
	UpdatedAt  time.Time    `json:"updated_at"`
}

// Refund is one refund request.
type Refund struct {
	ID            int64        `json:"id"`
	MerchantID    string       `json:"merchant_id"`
	InvoiceID     string       `json:"invoice_id"`
	WalletID      string       `json:"wallet_id"` // the wallet the invoice credited: the hold and the debit
	Currency      string       `json:"currency"`
	Amount        money.Amount `json:"amount"`
	Reason        string       `json:"reason"`
	ReasonDetails string       `json:"reason_details"`
	Status        string       `json:"status"`
	Resolution    string       `json:"resolution"`
	// TransactionID is the ledger transaction that paid it out (COMPLETED).
	TransactionID string    `json:"transaction_id,omitempty"`
	Invoice       Invoice   `json:"invoice"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// Book is the refund aggregate's instance: an invoice's refunds, oldest first.
type Book struct {
	InvoiceID  string   `json:"invoice_id"`
	MerchantID string   `json:"merchant_id"`
	Invoice    Invoice  `json:"invoice"`
	Refunds    []Refund `json:"refunds"`
}

// Committed is what the book's refunds take of the invoice: every refund not
// cancelled (a pending, disputed or overdue refund still holds its amount).
func (b Book) Committed() money.Amount {
	sum := money.Zero()
	for _, r := range b.Refunds {
		if r.Status != StatusCancelled {
			sum = sum.Add(r.Amount)
		}
	}
	return sum
}

// Find returns the index of a refund, -1 if the book has none with that id.
func (b Book) Find(id int64) int {
	return slices.IndexFunc(b.Refunds, func(r Refund) bool { return r.ID == id })
}

// Open adds a PENDING refund of amount to the book (a new book for inv when b is
// empty). The book is copied, never changed in place: the engine may still hold
// the old one.
func Open(b Book, inv Invoice, merchantID string, id int64, amount money.Amount, reason, details string, at time.Time) (Book, Refund, error) {
	if inv.State != "COMPLETE" {
		return b, Refund{}, ErrNotRefundable
	}
	if id <= 0 || amount.Sign() <= 0 || !slices.Contains(Reasons, reason) {
		return b, Refund{}, ErrInvalid
	}
	if b.InvoiceID == "" {
		b = Book{InvoiceID: inv.InvoiceID, MerchantID: merchantID, Invoice: inv}
	}
	if b.Find(id) >= 0 {
		return b, Refund{}, ErrExists
	}
	if len(b.Refunds) >= MaxPerInvoice {
		return b, Refund{}, ErrTooMany
	}
	if b.Committed().Add(amount).Cmp(b.Invoice.Value) > 0 {
		return b, Refund{}, ErrExceeds
	}
	r := Refund{ID: id, MerchantID: merchantID, InvoiceID: b.InvoiceID, WalletID: b.Invoice.WalletID, Currency: b.Invoice.Currency,
		Amount: amount, Reason: reason, ReasonDetails: details, Status: StatusPending, Invoice: b.Invoice, CreatedAt: at, UpdatedAt: at}
	b.Refunds = append(slices.Clone(b.Refunds), r)
	return b, r, nil
}

// Move changes a refund's status; it returns the new book and the refund before
// and after.
func Move(b Book, id int64, to, resolution, txn string, at time.Time) (Book, Refund, Refund, error) {
	i := b.Find(id)
	if i < 0 {
		return b, Refund{}, Refund{}, ErrNotFound
	}
	before := b.Refunds[i]
	if !CanMove(before.Status, to) {
		return b, before, before, fmt.Errorf("%w: a %s refund cannot become %s", ErrInvalid, before.Status, to)
	}
	after := before
	after.Status, after.UpdatedAt = to, at
	if resolution != "" {
		after.Resolution = resolution
	}
	if txn != "" {
		after.TransactionID = txn
	}
	b.Refunds = slices.Clone(b.Refunds)
	b.Refunds[i] = after
	return b, before, after, nil
}

// Create is the refund.create payload. The API allocates ID (a sequence) before
// issuing the command.
type Create struct {
	RefundID      int64        `json:"refund_id"`
	InvoiceID     string       `json:"invoice_id"`
	Amount        money.Amount `json:"amount"`
	Reason        string       `json:"reason"`
	ReasonDetails string       `json:"reason_details"`
}

// Settle is the refund.settle payload: a status change asked by the merchant
// (cancel) or reported by the rail (the sandbox simulator). From, when set, is
// the status the sender saw: the change applies only if the refund is still in it.
type Settle struct {
	RefundID   int64  `json:"refund_id"`
	InvoiceID  string `json:"invoice_id"`
	Status     string `json:"status"`
	From       string `json:"from,omitempty"`
	Resolution string `json:"resolution,omitempty"`
}

// Reversal is the reversal_event payload (the spec's fields).
type Reversal struct {
	ID                int64        `json:"id"`
	Amount            money.Amount `json:"amount"`
	Currency          string       `json:"currency"`
	Status            string       `json:"status"`
	Reason            string       `json:"reason"`
	OriginalInvoiceID string       `json:"original_invoice_id"`
	CreatedAt         time.Time    `json:"created_at"`
	UpdatedAt         time.Time    `json:"updated_at"`
}

// Event is the refund's reversal_event payload.
func (r Refund) Event() Reversal {
	return Reversal{ID: r.ID, Amount: r.Amount, Currency: r.Currency, Status: r.Status, Reason: r.Reason,
		OriginalInvoiceID: r.InvoiceID, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

// Transaction is the Refund resource's transaction object: the refunded
// collection as a wallet transaction.
type Transaction struct {
	Invoice       Invoice      `json:"invoice"`
	TransactionID string       `json:"transaction_id"`
	Currency      string       `json:"currency"`
	Value         money.Amount `json:"value"`
	Narrative     string       `json:"narrative"`
	TransType     string       `json:"trans_type"`
	Status        string       `json:"status"`
	CreatedAt     time.Time    `json:"created_at"`
	UpdatedAt     time.Time    `json:"updated_at"`
}

// View is the Refund / chargeback resource as merchants see it.
type View struct {
	ID            int64        `json:"id"`
	ChargebackID  string       `json:"chargeback_id"`
	SessionID     string       `json:"session_id"`
	Invoice       string       `json:"invoice"`
	Amount        money.Amount `json:"amount"`
	Currency      string       `json:"currency"`
	Reason        string       `json:"reason"`
	ReasonDetails string       `json:"reason_details"`
	Status        string       `json:"status"`
	Resolution    string       `json:"resolution"`
	StaffCreated  bool         `json:"staff_created"`
	Transaction   Transaction  `json:"transaction"`
	CreatedAt     time.Time    `json:"created_at"`
	UpdatedAt     time.Time    `json:"updated_at"`
}

// View returns the merchant-facing resource.
func (r Refund) View() View {
	inv := r.Invoice
	return View{ID: r.ID, ChargebackID: strconv.FormatInt(r.ID, 10), SessionID: inv.CheckoutID, Invoice: r.InvoiceID,
		Amount: r.Amount, Currency: r.Currency, Reason: r.Reason, ReasonDetails: r.ReasonDetails, Status: r.Status,
		Resolution: r.Resolution,
		Transaction: Transaction{Invoice: inv, TransactionID: inv.InvoiceID, Currency: inv.Currency, Value: inv.Value,
			Narrative: inv.APIRef, TransType: "SALE", Status: "AVAILABLE", CreatedAt: inv.CreatedAt, UpdatedAt: inv.UpdatedAt},
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}
