package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"time"

	"github.com/labstack/echo/v4"

	"paysvc/actors/aggregates/invoice"
	"paysvc/actors/aggregates/invoice/invoicestore"
	"paysvc/actors/aggregates/tariff"
	"paysvc/actors/values/ids"
	"paysvc/actors/values/money"
	"paysvc/api/edge"
	"paysvc/storage"
	"paysvc/topics"
)

var (
	phonePattern  = regexp.MustCompile(`^254\d{9}$`)
	apiRefPattern = regexp.MustCompile(`^[a-zA-Z0-9\-_ ]+$`)
)

// resultCodesLink documents M-Pesa's result codes (failed_code_link).
const resultCodesLink = "https://developer.safaricom.co.ke/APIs/MpesaExpressSimulate"

// stkPush sends an M-Pesa payment prompt: the invoice kind prices the amount asked
// and opens the invoice in PENDING, and the prompt goes out through the rails role
// after the commit.
func (s *Server) stkPush(c echo.Context) error {
	b, err := edge.ReadBody(c)
	if err != nil {
		return err
	}
	phone, err := b.Text("phone_number", true, 20, nil)
	if err != nil {
		return err
	}
	if !phonePattern.MatchString(phone) {
		return edge.Invalid("phone_number", "Enter a valid phone number in the format 254XXXXXXXXX.")
	}
	raw, _, err := b.Amount("amount", true)
	if err != nil {
		// M-Pesa amounts may carry more decimals: they are rounded up, not refused.
		v := b["amount"]
		var sv string
		if json.Unmarshal(v, &sv) != nil {
			sv = string(v)
		}
		r, perr := money.ParseRoundUp(sv)
		if perr != nil {
			return err
		}
		raw = r
	}
	// The prompt's bounds are checked here too, before the other fields, with words
	// of their own: an STK push is in KES, so no conversion is mentioned.
	amount := tariff.RoundUpShillings(raw)
	if amount.Cmp(invoice.MpesaMin) < 0 || amount.Cmp(invoice.MpesaMax) > 0 {
		return edge.Invalid("amount", "M-Pesa amount must be between KES 10 and KES 150,000.")
	}
	if cur, err := b.Str("currency", false, 3, nil); err != nil {
		return err
	} else if cur != "" && cur != "KES" {
		return edge.Invalid("currency", "M-Pesa STK push collects in KES.")
	}
	apiRef, err := b.Str("api_ref", false, 140, apiRefPattern)
	if err != nil {
		return err
	}
	if apiRef == "" {
		apiRef = "MPesa Express"
	}
	walletID, err := b.Str("wallet_id", false, 40, walletIDPattern)
	if err != nil {
		return err
	}
	tar, err := readTariff(b, "mobile_tarrif")
	if err != nil {
		return err
	}
	// The payer's details (the Python SDK sends name, email and narrative).
	email, err := b.Str("email", false, 254, emailPattern)
	if err != nil {
		return err
	}
	cust, err := readCustomer(b, "")
	if err != nil {
		return err
	}
	if err := readFullName(b, &cust); err != nil {
		return err
	}
	narrative, err := b.Str("narrative", false, 140, nil)
	if err != nil {
		return err
	}
	host, err := readHost(b)
	if err != nil {
		return err
	}
	_, sess, sig, err := s.openPayment(c, topics.InvoiceSTKPush{
		WalletID: walletID, Phone: phone, Amount: amount, Tariff: tar, APIRef: apiRef, Email: email, Customer: cust,
		Host: host, Narrative: narrative,
	})
	if err != nil {
		return err
	}
	// signature (beyond the Payment session's fields) lets a browser poll /payment/status.
	return c.JSON(http.StatusOK, struct {
		sessionJSON
		Signature string `json:"signature"`
	}{sess, sig})
}

// paymentStatus returns an invoice and its session meta.
func (s *Server) paymentStatus(c echo.Context) error {
	b, err := edge.ReadBody(c)
	if err != nil {
		return err
	}
	id, err := b.Str("invoice_id", true, 40, walletIDPattern)
	if err != nil {
		return err
	}
	checkout, err := b.Str("checkout_id", false, 64, nil)
	if err != nil {
		return err
	}
	inv, err := invoicestore.Get(c.Request().Context(), s.db, edge.PrincipalOf(c).MerchantID, id)
	if errors.Is(err, storage.ErrNotFound) {
		return edge.NotFound("Invoice not found.")
	}
	if err != nil {
		return err
	}
	if claims, ok := c.Get(ctxSignature).(signatureClaims); ok {
		// An invoice's own token, or its checkout's token with that checkout named.
		byInvoice := claims.Invoice != "" && claims.Invoice == id
		byCheckout := claims.Checkout != "" && claims.Checkout == checkout
		if !byInvoice && !byCheckout {
			return edge.ClientError(http.StatusForbidden, "permission_denied", "The signature is not valid for this invoice.")
		}
	}
	if checkout != "" && inv.CheckoutID != checkout {
		return edge.NotFound("Invoice not found for this checkout.")
	}
	sess, err := s.paymentSession(c, inv)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"invoice": sess.Invoice, "meta": map[string]any{
		"id": sess.ID, "customer": sess.Customer, "customer_comment": sess.CustomerComment, "created_at": sess.CreatedAt,
		"payment_link": sess.PaymentLink,
	}})
}

// openPayment opens the invoice cmd asks for and answers it as a Payment session
// (paymentSession), with the invoice and its status token.
func (s *Server) openPayment(c echo.Context, cmd topics.InvoiceSTKPush) (invoice.State, sessionJSON, string, error) {
	inv, sig, err := s.openInvoice(c, cmd)
	if err != nil {
		return inv, sessionJSON{}, "", err
	}
	sess, err := s.paymentSession(c, inv)
	return inv, sess, sig, err
}

// paymentSession is an invoice's Payment session as the caller may see it: the
// payer hidden from who may not see payers, with the payment link it pays through.
func (s *Server) paymentSession(c echo.Context, inv invoice.State) (sessionJSON, error) {
	sess := renderSession(inv)
	hidePayer(c, &sess)
	var err error
	sess.PaymentLink, err = s.sessionLink(c, inv)
	return sess, err
}

type invoiceJSON struct {
	ID             string       `json:"id"`
	InvoiceID      string       `json:"invoice_id"`
	State          string       `json:"state"`
	Provider       string       `json:"provider"`
	Charges        money.Amount `json:"charges"`
	NetAmount      money.Amount `json:"net_amount"`
	Currency       string       `json:"currency"`
	Value          money.Amount `json:"value"`
	Account        *string      `json:"account"`
	APIRef         string       `json:"api_ref"`
	ClearingStatus string       `json:"clearing_status"`
	MpesaReference *string      `json:"mpesa_reference"`
	Host           *string      `json:"host"`
	RetryCount     int          `json:"retry_count"`
	FailedReason   *string      `json:"failed_reason"`
	FailedCode     *string      `json:"failed_code"`
	FailedCodeLink *string      `json:"failed_code_link"`
	CreatedAt      time.Time    `json:"created_at"`
	UpdatedAt      time.Time    `json:"updated_at"`
}

// customerJSON is the spec's Payment customer: identity, country and zipcode. The
// rest of the billing address (address, city, state) is kept on the invoice but
// not shown, as the resource has no field for it.
type customerJSON struct {
	CustomerID  *string   `json:"customer_id"` // null where the payer is not shown (hidePayer)
	PhoneNumber *string   `json:"phone_number"`
	Email       *string   `json:"email"`
	FirstName   *string   `json:"first_name"`
	LastName    *string   `json:"last_name"`
	Country     *string   `json:"country"`
	Zipcode     *string   `json:"zipcode"`
	Provider    string    `json:"provider"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

type sessionJSON struct {
	ID          string           `json:"id"`
	Invoice     invoiceJSON      `json:"invoice"`
	Customer    customerJSON     `json:"customer"`
	PaymentLink *paymentLinkJSON `json:"payment_link"` // null: not paid through a payment link
	// CustomerComment is the comment the checkout session was created with.
	CustomerComment *string `json:"customer_comment"`
	// Refundable is a string, as the spec's resource types it: "true" once the
	// invoice is COMPLETE, else "false" (docs/api-decisions.md).
	Refundable string    `json:"refundable"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

func optional(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}

// renderSession is the Payment session of the interface for an invoice.
func renderSession(s invoice.State) sessionJSON {
	// Collected M-Pesa funds clear at once, card funds later (docs/api-decisions.md).
	clearing := "PENDING"
	if s.State == invoice.StateComplete && s.Cleared {
		clearing = "AVAILABLE"
	}
	inv := invoiceJSON{ID: s.InvoiceID, InvoiceID: s.InvoiceID, State: s.State, Provider: s.Provider, Charges: s.Charges,
		NetAmount: s.NetAmount, Currency: s.Currency, Value: s.Value, Account: optional(s.Account), APIRef: s.APIRef,
		ClearingStatus: clearing, MpesaReference: optional(s.MpesaReference), Host: optional(s.Host),
		FailedReason: optional(s.FailedReason), FailedCode: optional(s.FailedCode), CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
	if s.FailedCode != "" {
		link := resultCodesLink + "#" + s.FailedCode
		inv.FailedCodeLink = &link
	}
	// A customer is known by the number that paid, else by their email.
	who := s.Account
	if who == "" {
		who = s.Email
	}
	customerID := s.Customer.CustomerID
	if customerID == "" {
		customerID = ids.Derive(8, "customer", s.MerchantID, who)
	}
	refundable := "false"
	if s.State == invoice.StateComplete {
		refundable = "true"
	}
	return sessionJSON{
		ID:      ids.DeriveUUID("session", s.InvoiceID),
		Invoice: inv,
		Customer: customerJSON{CustomerID: &customerID, PhoneNumber: optional(s.Account),
			Email: optional(s.Email), FirstName: optional(s.Customer.FirstName), LastName: optional(s.Customer.LastName),
			Country: optional(s.Customer.Country), Zipcode: optional(s.Customer.Zipcode),
			Provider: s.Provider, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt},
		CustomerComment: optional(s.Customer.Comment), Refundable: refundable, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
	}
}
