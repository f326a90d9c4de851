package api

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"paysvc/actors/rails/card"
	"paysvc/api/edge"
	"paysvc/topics"
)

var (
	panPattern    = regexp.MustCompile(`^[0-9]{12,19}$`)
	cvvPattern    = regexp.MustCompile(`^[0-9]{3,4}$`)
	expiryPattern = regexp.MustCompile(`^(0[1-9]|1[0-2])/([0-9]{2})$`)
)

// luhn checks a card number's check digit.
func luhn(pan string) bool {
	sum, double := 0, false
	for i := len(pan) - 1; i >= 0; i-- {
		d := int(pan[i] - '0')
		if double {
			if d *= 2; d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

func cardNetwork(pan string) string {
	switch {
	case strings.HasPrefix(pan, "4"):
		return "VISA"
	case pan[0] == '5' || strings.HasPrefix(pan, "22"):
		return "MASTERCARD"
	case strings.HasPrefix(pan, "34") || strings.HasPrefix(pan, "37"):
		return "AMEX"
	}
	return "CARD"
}

// readCardFields validates card_number (digits, Luhn), expiry (MM/YY, not past)
// and cvv, and returns the number without spaces. The caller keeps only what it
// must (last four digits, network, a masked number): never the number or the CVV.
func readCardFields(b edge.Body) (string, error) {
	pan, err := b.Str("card_number", true, 23, nil)
	if err != nil {
		return "", err
	}
	pan = strings.ReplaceAll(pan, " ", "")
	if !panPattern.MatchString(pan) || !luhn(pan) {
		return "", edge.Invalid("card_number", "Enter a valid card number.")
	}
	exp, err := b.Str("expiry", true, 5, nil)
	if err != nil {
		return "", err
	}
	m := expiryPattern.FindStringSubmatch(exp)
	if m == nil {
		return "", edge.Invalid("expiry", "Enter the expiry as MM/YY.")
	}
	month, _ := strconv.Atoi(m[1])
	year, _ := strconv.Atoi(m[2])
	if time.Date(2000+year, time.Month(month)+1, 1, 0, 0, 0, 0, time.UTC).Before(time.Now()) {
		return "", edge.Invalid("expiry", "The card has expired.")
	}
	if cvv, err := b.Str("cvv", true, 4, nil); err != nil {
		return "", err
	} else if !cvvPattern.MatchString(cvv) {
		return "", edge.Invalid("cvv", "Enter the 3 or 4 digit security code.")
	}
	return pan, nil
}

// cardPayment charges a card (sandbox: test numbers, docs/sandbox.md). The card
// number is validated here and then forgotten: only its last four digits and network
// go further, and nothing logs the request body. Card funds count in current_balance
// on completion and in available_balance once cleared.
func (s *Server) cardPayment(c echo.Context) error {
	if s.cfg.Environment != "sandbox" {
		// No live card acquirer is connected: refuse rather than leave invoices pending.
		return edge.ClientError(http.StatusBadRequest, "method_unavailable", "Card payments are not available on this server yet.")
	}
	b, err := edge.ReadBody(c)
	if err != nil {
		return err
	}
	pan, err := readCardFields(b)
	if err != nil {
		return err
	}
	target, err := s.readPaymentTarget(c, b)
	if err != nil {
		return err
	}
	apiRef, err := b.Str("api_ref", false, 140, apiRefPattern)
	if err != nil {
		return err
	}
	tar, err := readTariff(b, "card_tarrif")
	if err != nil {
		return err
	}
	if target.checkout != nil {
		// The session's tariff, whatever the request says (the page is public).
		tar = target.checkout.CardTarrif
	}
	walletID, err := b.Str("wallet_id", false, 40, walletIDPattern)
	if err != nil {
		return err
	}
	cust, host, err := readPayer(b)
	if err != nil {
		return err
	}
	phone, err := b.Text("phone_number", false, 20, nil)
	if err != nil {
		return err
	}
	if phone != "" && !phonePattern.MatchString(phone) {
		return edge.Invalid("phone_number", "Enter a valid phone number in the format 254XXXXXXXXX.")
	}
	if phone == "" && target.checkout != nil && target.checkout.PhoneNumber != nil {
		phone = *target.checkout.PhoneNumber
	}
	// The invoice kind converts and prices what the customer asked (invoice.Quote),
	// behind the log.
	inv, sess, sig, err := s.openPayment(c, topics.InvoiceSTKPush{
		WalletID: target.sessionWallet(walletID), Phone: phone, Amount: target.amount, Currency: target.currency,
		Tariff: tar, APIRef: apiRef, CheckoutID: target.checkoutID, Email: target.email,
		Provider: "CARD", CardLast4: pan[len(pan)-4:], CardNetwork: cardNetwork(pan), TestOutcome: card.TestOutcome(pan),
		Customer: withSession(cust, target.checkout), Host: host, PaymentLinkID: target.paymentLinkID(),
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"invoice": sess.Invoice, "signature": sig, "payment_link": sess.PaymentLink,
		"card": map[string]string{"last4": inv.CardLast4, "network": inv.CardNetwork}})
}
