// Package refund is the refund (chargeback) aggregate: the pure part, with no
// engine or storage in it. Its instance is the refund book of one invoice: every
// refund of that invoice, so the rule "refunds never add up to more than the
// invoice collected" is checked against one state that the engine's partition
// (all of a merchant's commands, in order) changes one command at a time, also
// under concurrent requests: the book's actor runs Step (step.go), asked by
// refundkind, which wires the aggregate into the engine; its rows and reads are
// in refundstore, and its batch function in storage/functions/paysvc_apply_refund.sql.
package refund

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"paysvc/actors/values/money"
)

// Command types (registered by refundkind). Each has exactly one principal, who
// alone produces it (PrincipalOf): the engine takes the principal from the type,
// never from anything a producer writes into the payload.
const (
	CmdCreate = "refund.create" // the merchant, through the API
	CmdCancel = "refund.cancel" // the merchant, through the API
	CmdTake   = "refund.take"   // the rail: it is about to send the money
	CmdSettle = "refund.settle" // the rail: its outcome
)

// Principals: who may cause a transition (docs/state-machines.md, "Refund").
const (
	ByMerchant = "merchant" // the merchant's API requests (a secret key with add_refunds)
	ByRail     = "rail"     // the payer's refund rail: the sandbox simulator, or a live adapter
	ByNobody   = "nobody"   // anyone else: no transition is theirs
)

// PrincipalOf names the principal of a command type: the API alone produces the
// merchant's, a rail (simulator or adapter) alone produces the rail's.
func PrincipalOf(cmd string) string {
	switch cmd {
	case CmdCreate, CmdCancel:
		return ByMerchant
	case CmdTake, CmdSettle:
		return ByRail
	}
	return ByNobody
}

// Statuses (docs/state-machines.md). The public service shows these five.
const (
	StatusPending   = "PENDING"
	StatusCompleted = "COMPLETED"
	StatusCancelled = "CANCELLED"
	StatusDisputed  = "DISPUTED"
	StatusOverdue   = "OVERDUE"
)

// Statuses lists them all.
var Statuses = []string{StatusPending, StatusCompleted, StatusCancelled, StatusDisputed, StatusOverdue}

// States of the table: the public statuses, plus two that the table needs and the
// interface does not show.
const (
	// StateNone: no refund of that id yet.
	StateNone = ""
	// StateTaken is PENDING once the rail has taken the refund (TakenAt set): the
	// rail may be sending the money, so the merchant can no longer cancel it. The
	// public status stays PENDING; taking emits no reversal_event.
	StateTaken = "PENDING(taken)"
)

// States lists every state of the table.
var States = []string{StateNone, StatusPending, StateTaken, StatusDisputed, StatusOverdue, StatusCompleted, StatusCancelled}

// Money effects of a transition on the refund's wallet.
const (
	MoneyNone    = ""
	MoneyHold    = "hold"    // available -> held (creation)
	MoneyRelease = "release" // held -> available again
	MoneyDebit   = "debit"   // held -> out of the wallet, to system:refunds_clearing
)

// Rule is one allowed transition: who may cause it, the state after it and what
// it does to the money.
type Rule struct {
	By    string
	To    string // a state (StateTaken for a taken PENDING)
	Money string
}

// ruleKey is (state, command, status reported): Report is refund.settle's status,
// empty for the other commands.
type ruleKey struct{ From, Cmd, Report string }

// rules is the refund state machine, the table of docs/state-machines.md
// ("Refund (chargeback)"): every (state, command) not here is refused, and each
// rule names its one principal. The rail's word wins over the merchant's: once
// the rail may have moved money (it took the refund, or reported DISPUTED or
// OVERDUE) only the rail can end the refund, and its late confirmation is
// applied and debited whatever the merchant asked meanwhile. A rail outcome on a
// PENDING refund the rail never took applies too: the hold is still there, and
// refusing a rail that says it paid would leave the payer paid and the merchant
// not debited (an adapter should take first, so that a cancel cannot race it).
var rules = func() map[ruleKey]Rule {
	r := map[ruleKey]Rule{
		{StateNone, CmdCreate, ""}:     {ByMerchant, StatusPending, MoneyHold},
		{StatusPending, CmdCancel, ""}: {ByMerchant, StatusCancelled, MoneyRelease},
		// Taking is idempotent where the refund is already with the rail: an
		// adapter retrying after a crash learns it may (still) pay.
		{StatusPending, CmdTake, ""}:  {ByRail, StateTaken, MoneyNone},
		{StateTaken, CmdTake, ""}:     {ByRail, StateTaken, MoneyNone},
		{StatusDisputed, CmdTake, ""}: {ByRail, StatusDisputed, MoneyNone},
		{StatusOverdue, CmdTake, ""}:  {ByRail, StatusOverdue, MoneyNone},
	}
	for _, from := range []string{StatusPending, StateTaken} {
		r[ruleKey{from, CmdSettle, StatusCompleted}] = Rule{ByRail, StatusCompleted, MoneyDebit}
		r[ruleKey{from, CmdSettle, StatusCancelled}] = Rule{ByRail, StatusCancelled, MoneyRelease} // declined
		r[ruleKey{from, CmdSettle, StatusDisputed}] = Rule{ByRail, StatusDisputed, MoneyNone}
		r[ruleKey{from, CmdSettle, StatusOverdue}] = Rule{ByRail, StatusOverdue, MoneyNone}
	}
	for _, from := range []string{StatusDisputed, StatusOverdue} {
		r[ruleKey{from, CmdSettle, StatusCompleted}] = Rule{ByRail, StatusCompleted, MoneyDebit} // late confirmation
		r[ruleKey{from, CmdSettle, StatusCancelled}] = Rule{ByRail, StatusCancelled, MoneyRelease}
	}
	return r
}()

// RuleFor returns the rule of (state, command, reported status), if there is one.
func RuleFor(state, cmd, report string) (Rule, bool) {
	r, ok := rules[ruleKey{state, cmd, report}]
	return r, ok
}

// Decide checks a command against the table: the rule, or why it is refused.
func Decide(state, cmd, report, by string) (Rule, error) {
	r, ok := RuleFor(state, cmd, report)
	switch {
	case ok && r.By == by:
		return r, nil
	case ok:
		return Rule{}, fmt.Errorf("%w: %s is the %s's, not the %s's", ErrPrincipal, cmd, r.By, by)
	case cmd == CmdCancel && (state == StateTaken || state == StatusDisputed || state == StatusOverdue):
		return Rule{}, ErrWithRail
	case cmd == CmdCancel:
		return Rule{}, fmt.Errorf("%w: a %s refund cannot be cancelled", ErrNotCancellable, state)
	case state == StateNone:
		return Rule{}, ErrNotFound
	case cmd == CmdCreate:
		return Rule{}, ErrExists
	}
	return Rule{}, fmt.Errorf("%w: %s %s cannot apply to a %s refund", ErrInvalid, cmd, report, state)
}

// StatusOf is the public status of a table state.
func StatusOf(state string) string {
	if state == StateTaken {
		return StatusPending
	}
	return state
}

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
	// ErrNotCancellable: the merchant's cancel of a final refund.
	ErrNotCancellable = errors.New("refund not cancellable")
	// ErrWithRail: the merchant's cancel of a refund the rail has (taken PENDING,
	// DISPUTED, OVERDUE): the money may have left; only the rail can end it now.
	ErrWithRail = fmt.Errorf("%w: the refund is with the payer's rail", ErrNotCancellable)
	// ErrPrincipal: a command from a principal the rule is not for.
	ErrPrincipal = errors.New("refund command from the wrong principal")
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
	TransactionID string `json:"transaction_id,omitempty"`
	// TakenAt is when the rail took the refund (refund.take, or its first
	// outcome): from then on the money may be leaving, and only the rail can end
	// it. Zero (absent in refunds stored before it existed) reads as not taken.
	// It is not part of the merchant's resource: the public status stays PENDING.
	TakenAt   time.Time `json:"taken_at,omitzero"`
	Invoice   Invoice   `json:"invoice"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// State is the refund's state in the table: its status, or StateTaken.
func (r Refund) State() string {
	if r.Status == StatusPending && !r.TakenAt.IsZero() {
		return StateTaken
	}
	return r.Status
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
// empty), as principal by asked it (refund.create is the merchant's). The book is
// copied, never changed in place: the engine may still hold the old one.
func Open(b Book, inv Invoice, by, merchantID string, id int64, amount money.Amount, reason, details string, at time.Time) (Book, Refund, error) {
	state := StateNone
	if i := b.Find(id); i >= 0 {
		state = b.Refunds[i].State()
	}
	if _, err := Decide(state, CmdCreate, "", by); err != nil {
		return b, Refund{}, err
	}
	if inv.State != "COMPLETE" {
		return b, Refund{}, ErrNotRefundable
	}
	if id <= 0 || amount.Sign() <= 0 || !slices.Contains(Reasons, reason) {
		return b, Refund{}, ErrInvalid
	}
	if b.InvoiceID == "" {
		b = Book{InvoiceID: inv.InvoiceID, MerchantID: merchantID, Invoice: inv}
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

// Move applies one of cmd (refund.cancel, refund.take, refund.settle reporting
// status report), sent by principal by, to refund id: it checks the table
// (Decide) and returns the new book, the refund before and after, and the rule,
// whose Money the caller carries out. txn is the ledger transaction that pays the
// refund out, kept only when the rule debits. A rule that changes nothing (a
// repeated take) returns the book as it was, and after == before.
func Move(b Book, id int64, cmd, report, by, resolution, txn string, at time.Time) (Book, Refund, Refund, Rule, error) {
	i := b.Find(id)
	if i < 0 {
		return b, Refund{}, Refund{}, Rule{}, ErrNotFound
	}
	before := b.Refunds[i]
	rule, err := Decide(before.State(), cmd, report, by)
	if err != nil {
		return b, before, before, Rule{}, err
	}
	after := before
	if by == ByRail && after.TakenAt.IsZero() {
		// Whatever the rail said, it had the refund: only it can end it now.
		after.TakenAt = at
	}
	if to := StatusOf(rule.To); to != before.Status {
		after.Status, after.UpdatedAt = to, at
		if resolution != "" {
			after.Resolution = resolution
		}
	}
	if rule.Money == MoneyDebit {
		after.TransactionID = txn
	}
	if after.Status == before.Status && after.TakenAt.Equal(before.TakenAt) {
		return b, before, before, rule, nil
	}
	b.Refunds = slices.Clone(b.Refunds)
	b.Refunds[i] = after
	return b, before, after, rule, nil
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

// Cancel is the refund.cancel payload: the merchant withdraws a refund the rail
// has not taken (the API's POST /chargebacks/{id}/cancel/).
type Cancel struct {
	RefundID  int64  `json:"refund_id"`
	InvoiceID string `json:"invoice_id"`
}

// Take is the refund.take payload: the rail takes the refund before it sends any
// money; from then on the merchant cannot cancel it.
type Take struct {
	RefundID  int64  `json:"refund_id"`
	InvoiceID string `json:"invoice_id"`
}

// Settle is the refund.settle payload: an outcome the rail reports (COMPLETED,
// CANCELLED = declined, DISPUTED, OVERDUE). From, when set, is the status the
// rail saw: the change applies only if the refund is still in it.
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
