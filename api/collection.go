package api

import (
	"errors"
	"net/http"
	"regexp"
	"strings"

	"github.com/labstack/echo/v4"

	"paysvc/actors/aggregates/invoice"
	"paysvc/actors/aggregates/tariff"
	"paysvc/actors/rails/card"
	"paysvc/api/edge"
	"paysvc/topics"
)

// The collection rules the API's other checks use are the invoice aggregate's:
// a fixed checkout amount is held to the same ceiling, and a session records the
// same default tariff, as the invoice kind prices with.
var (
	maxCollectionKES = invoice.MaxCollection
	tarOrDefault     = invoice.TariffOrDefault
)

var (
	namePattern    = regexp.MustCompile(`^[a-zA-Z0-9\-_ ]+$`)
	emailPattern   = regexp.MustCompile(`^[^@\s]+@[^@\s]+\.[^@\s]+$`)
	countryPattern = regexp.MustCompile(`^[a-zA-Z]{2}$`)
)

// collection initiates a collection (POST /payment/collection/). M-Pesa prompts the
// customer like the STK push; amounts in USD, EUR or GBP are converted to KES at the
// configured rates by the invoice kind (M-Pesa settles in KES) before the KES
// 10..150,000 limit applies.
func (s *Server) collection(c echo.Context) error {
	b, err := edge.ReadBody(c)
	if err != nil {
		return err
	}
	method, err := b.Str("method", true, 20, nil)
	if err != nil {
		return err
	}
	if method != "M-PESA" && method != "PESALINK" {
		return edge.Invalid("method", "method must be M-PESA or PESALINK.")
	}
	if method == "PESALINK" && s.cfg.Environment != "sandbox" {
		// No live PesaLink connection: refuse rather than leave invoices pending.
		return edge.Invalid("method", "PESALINK collections are not available on this server yet.")
	}
	target, err := s.readPaymentTarget(c, b)
	if err != nil {
		return err
	}
	apiRef, err := b.Str("api_ref", true, 140, apiRefPattern)
	if err != nil {
		return err
	}
	if method == "PESALINK" && target.checkout != nil {
		// A session prices M-Pesa and card by its own tariffs; it has no bank
		// tariff, and the payer must not pick who pays the fee (docs/api-decisions.md).
		return edge.Invalid("method", "Checkout sessions are paid by M-Pesa or card, not PESALINK.")
	}
	sessionPhone := target.checkout != nil && target.checkout.PhoneNumber != nil
	phone, err := b.Text("phone_number", method == "M-PESA" && !sessionPhone, 20, nil)
	if err != nil {
		return err
	}
	if phone == "" && sessionPhone {
		phone = *target.checkout.PhoneNumber
	}
	if strings.Contains(phone, "*") { // the hosted page's masked prefill, kept by the payer
		if phone, err = s.prefilledPhone(c, target, phone); err != nil {
			return err
		}
	}
	if phone != "" && !phonePattern.MatchString(phone) {
		return edge.Invalid("phone_number", "Enter a valid phone number in the format 254XXXXXXXXX.")
	}
	cust, host, err := readPayer(b)
	if err != nil {
		return err
	}
	walletID, err := b.Str("wallet_id", false, 40, walletIDPattern)
	if err != nil {
		return err
	}
	// A currency without a rate is refused before the tariff is read, the order the
	// fields are answered in; the amount the command carries is the customer's.
	if _, _, err := invoice.Convert(s.cfg.Rates, target.currency, target.amount); err != nil {
		return priceRefusal(err)
	}
	// The invoice kind converts and prices what the customer asked (invoice.Quote),
	// behind the log.
	cmd := topics.InvoiceSTKPush{WalletID: target.sessionWallet(walletID), Phone: phone,
		Amount: target.amount, Currency: target.currency, APIRef: apiRef,
		CheckoutID: target.checkoutID, Email: target.email, Customer: withSession(cust, target.checkout), Host: host,
		PaymentLinkID: target.paymentLinkID()}
	if method == "PESALINK" {
		if cmd.Tariff, err = readTariff(b, "bank_tarrif"); err != nil {
			return err
		}
		cmd.Provider, cmd.TestOutcome = "PESALINK", card.PesalinkTestOutcome(phone)
	} else {
		if cmd.Tariff, err = readTariff(b, "mobile_tarrif"); err != nil {
			return err
		}
		if target.checkout != nil {
			cmd.Tariff = target.checkout.MobileTarrif
		}
	}
	_, sess, sig, err := s.openPayment(c, cmd)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"invoice": sess.Invoice, "customer": sess.Customer, "signature": sig,
		"payment_link": sess.PaymentLink})
}

// readTariff reads a tariff field: BUSINESS-PAYS, CUSTOMER-PAYS or absent. The
// spelling is input, checked here; what the tariff costs is the invoice kind's.
func readTariff(b edge.Body, field string) (string, error) {
	tar, err := b.Str(field, false, 20, nil)
	if err != nil {
		return "", err
	}
	if tar != "" && tar != tariff.BusinessPays && tar != tariff.CustomerPays {
		return "", edge.Invalid(field, field+" must be BUSINESS-PAYS or CUSTOMER-PAYS.")
	}
	return tar, nil
}

// priceRefusal is the 400 of a collection the invoice aggregate's rules refuse
// (invoice.PriceError), in the field and words the invoice kind refuses with; any
// other error is returned as it is.
func priceRefusal(err error) error {
	var pe *invoice.PriceError
	if errors.As(err, &pe) {
		return edge.Invalid(pe.Attr, pe.Detail)
	}
	return err
}

// readPayer reads what a payment request says of its payer (the customer fields)
// and of its origin (the host).
func readPayer(b edge.Body) (topics.PaymentCustomer, string, error) {
	cust, err := readCustomer(b, "")
	if err != nil {
		return cust, "", err
	}
	host, err := readHost(b)
	return cust, host, err
}
