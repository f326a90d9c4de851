package topics

import (
	"time"

	"paysvc/actors/values/money"
)

// Collection command types on paysvc.commands.v1.
const (
	CmdInvoiceSTKPush        = "invoice.stk_push"
	CmdInvoiceProviderResult = "invoice.provider_result"
)

// RailsCardTopic carries card charges to the rails role (the sandbox card
// simulator). Records carry no card number: only its last four digits, its network
// and, in the sandbox, the outcome its test number stands for.
const RailsCardTopic = "paysvc.rails.card.v1"

// RailsPesalinkTopic carries PesaLink collection requests to the rails role (the
// sandbox PesaLink simulator); records are CardRequest-shaped (no card fields).
const RailsPesalinkTopic = "paysvc.rails.pesalink.v1"

// CmdInvoiceClear releases a completed card collection's funds to the available
// balance once they have cleared.
const CmdInvoiceClear = "invoice.clear"

// InvoiceClear is the payload of CmdInvoiceClear.
type InvoiceClear struct {
	InvoiceID string `json:"invoice_id"`
}

// CardRequest is a record of RailsCardTopic.
type CardRequest struct {
	InvoiceID   string       `json:"invoice_id"`
	MerchantID  string       `json:"merchant_id"`
	Amount      money.Amount `json:"amount"`
	Currency    string       `json:"currency"`
	Last4       string       `json:"last4"`
	Network     string       `json:"network"`
	TestOutcome string       `json:"test_outcome"` // sandbox: success, declined, insufficient_funds
}

// RailsMpesaSTKTopic carries STK push requests from the engine's outbox to the rails
// role, which calls the M-Pesa rail (the sandbox simulator or Daraja). Keyed by
// merchant. Internal: not a webhook topic.
const RailsMpesaSTKTopic = "paysvc.rails.mpesa_stk.v1"

// InvoiceSTKPush opens an invoice (an M-Pesa STK prompt, a card charge or a
// PesaLink collection) for what the customer asked to pay: Amount in Currency
// (empty: KES, as every opening command without one carries) under Tariff (empty:
// BUSINESS-PAYS). The invoice kind converts and prices it (invoice.Quote): the KES
// amount and the invoice's value, charges and net_amount are computed behind the
// log at the rates and fees the kind was given, never carried in the command.
type InvoiceSTKPush struct {
	InvoiceID string       `json:"invoice_id"`
	WalletID  string       `json:"wallet_id,omitempty"` // empty: the merchant's KES settlement wallet
	Phone     string       `json:"phone_number"`
	Amount    money.Amount `json:"amount"`
	Currency  string       `json:"currency,omitempty"`
	Tariff    string       `json:"tariff"`
	APIRef    string       `json:"api_ref"`
	// CheckoutID links the invoice to the checkout session it pays; Email is the
	// payer's, remembered to pre-fill their next checkout.
	CheckoutID string `json:"checkout_id,omitempty"`
	Email      string `json:"email,omitempty"`
	// Provider is M-PESA (default) or CARD; card charges carry the card's last four
	// digits and network (never the number) and the sandbox outcome.
	Provider    string `json:"provider,omitempty"`
	CardLast4   string `json:"card_last4,omitempty"`
	CardNetwork string `json:"card_network,omitempty"`
	TestOutcome string `json:"test_outcome,omitempty"`
	// Customer is what the request (or the checkout session it pays) said about the
	// payer, shown back in the Payment session's customer; Host is the invoice's
	// origin host; Narrative the merchant's description of the payment (the
	// Python SDK's STK push sends one). All optional, checked by the API.
	Customer  PaymentCustomer `json:"customer,omitzero"`
	Host      string          `json:"host,omitempty"`
	Narrative string          `json:"narrative,omitempty"`
	// PaymentLinkID is the payment link the invoice pays through (its checkout
	// session was opened for it), shown as the Payment session's payment_link.
	PaymentLinkID string `json:"payment_link_id,omitempty"`
}

// PaymentCustomer is the payer's identity and billing address as a collection
// request gave them (the payer's email and phone travel as Email and Phone); the
// invoice keeps it as it is (invoice.Customer).
type PaymentCustomer struct {
	// CustomerID is the merchant's customer record of the payer's email (the
	// customers API); empty when the payment carried no email.
	CustomerID string `json:"customer_id,omitempty"`
	FirstName  string `json:"first_name,omitempty"`
	LastName   string `json:"last_name,omitempty"`
	Country    string `json:"country,omitempty"`
	Zipcode    string `json:"zipcode,omitempty"`
	Address    string `json:"address,omitempty"`
	City       string `json:"city,omitempty"`
	State      string `json:"state,omitempty"`
	Comment    string `json:"comment,omitempty"`
}

// ProviderResult is a rail's outcome for an invoice, fed back as a command. Its
// command id is derived from the invoice and the stage, so a repeated callback is
// applied once.
type ProviderResult struct {
	InvoiceID         string `json:"invoice_id"`
	Stage             string `json:"stage"` // SENT, UNKNOWN, ACCEPTED or FINAL
	Code              int    `json:"code"`
	Description       string `json:"description"`
	Receipt           string `json:"receipt,omitempty"`
	CheckoutRequestID string `json:"checkout_request_id,omitempty"`
	// PaidAmount is the amount the provider reports as paid on a success (an
	// M-Pesa callback's Amount); absent when the provider does not say (Daraja's
	// status query). The engine credits nothing when it differs from the invoice.
	PaidAmount *money.Amount `json:"paid_amount,omitempty"`
}

// STKRequest is a record of RailsMpesaSTKTopic.
type STKRequest struct {
	InvoiceID  string       `json:"invoice_id"`
	MerchantID string       `json:"merchant_id"`
	Phone      string       `json:"phone_number"`
	Amount     money.Amount `json:"amount"`
	AccountRef string       `json:"account_ref"`
}

// Collection is the payload of a collection_event: the invoice at the time of the
// change. The spec's event shows the provider as MPESA.
type Collection struct {
	ID        string `json:"id"`
	InvoiceID string `json:"invoice_id"`
	State     string `json:"state"`
	// Provider is in the events' vocabulary (see CollectionProvider): MPESA, CARD or
	// PESALINK.
	Provider  string `json:"provider"`
	Value     string `json:"value"`
	Charges   string `json:"charges"`
	NetAmount string `json:"net_amount"`
	Currency  string `json:"currency"`
	// Account is the paying phone number, null when the payment has none (a card
	// or PesaLink collection without a phone), as the invoice shows it.
	Account        *string   `json:"account"`
	APIRef         string    `json:"api_ref"`
	MpesaReference *string   `json:"mpesa_reference"`
	FailedReason   *string   `json:"failed_reason"`
	FailedCode     *string   `json:"failed_code"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// CollectionProvider is an invoice's provider as collection_event shows it: the spec
// notes events write M-Pesa as MPESA, where invoices say M-PESA; CARD and PESALINK
// are the same in both.
func CollectionProvider(invoiceProvider string) string {
	if invoiceProvider == "M-PESA" {
		return "MPESA"
	}
	return invoiceProvider
}
