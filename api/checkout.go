package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"paysvc/actors/aggregates/invoice"
	"paysvc/actors/aggregates/tariff"
	"paysvc/actors/aggregates/wallet"
	"paysvc/actors/aggregates/wallet/walletstore"
	"paysvc/actors/values/ids"
	"paysvc/actors/values/money"
	"paysvc/api/edge"
	"paysvc/storage"
)

var (
	checkoutCurrencies = map[string]bool{"KES": true, "USD": true, "EUR": true, "GBP": true, "UGX": true, "TZS": true}
	// checkoutOnlyCurrencies are taken through checkout sessions only (the spec
	// lists them for checkout alone); payments convert them to KES at the
	// configured rates like USD, EUR and GBP (docs/api-decisions.md).
	checkoutOnlyCurrencies = map[string]bool{"UGX": true, "TZS": true}
	ugxTzsMin              = money.MustParse("500.00")
	ugxTzsMax              = money.MustParse("5000000.00")
)

type checkoutJSON struct {
	ID           string        `json:"id"`
	Signature    string        `json:"signature"`
	URL          string        `json:"url"`
	Amount       *money.Amount `json:"amount"`
	Currency     string        `json:"currency"`
	Email        *string       `json:"email"`
	APIRef       *string       `json:"api_ref"`
	Paid         bool          `json:"paid"`
	CardTarrif   string        `json:"card_tarrif"`
	MobileTarrif string        `json:"mobile_tarrif"`
	WalletID     *string       `json:"wallet_id"`
	RedirectURL  *string       `json:"redirect_url"`
	CreatedAt    time.Time     `json:"created_at"`
	UpdatedAt    time.Time     `json:"updated_at"`
}

// checkoutSignature is the signature a checkout session is paid and polled with,
// by the hosted page or a merchant's own: the session's capability.
func (s *Server) checkoutSignature(ctx context.Context, merchantID, checkoutID string) (string, error) {
	return s.sig.sign(ctx, signatureClaims{Merchant: merchantID, Checkout: checkoutID, Expires: time.Now().Add(signatureTTL).Unix()})
}

func (s *Server) renderCheckout(c echo.Context, co storage.Checkout) (checkoutJSON, error) {
	sig, err := s.checkoutSignature(c.Request().Context(), co.MerchantID, co.CheckoutID)
	if err != nil {
		return checkoutJSON{}, err
	}
	return checkoutJSON{ID: co.CheckoutID, Signature: sig, URL: s.checkoutURL(co.CheckoutID),
		Amount: co.Amount, Currency: co.Currency, Email: co.Email, APIRef: co.APIRef, Paid: co.Paid,
		CardTarrif: co.CardTarrif, MobileTarrif: co.MobileTarrif, WalletID: co.WalletID, RedirectURL: co.RedirectURL,
		CreatedAt: co.CreatedAt, UpdatedAt: co.UpdatedAt}, nil
}

// createCheckout creates a checkout session (public key only). With unique_api_ref
// and an existing session of the same api_ref, that session is returned instead.
func (s *Server) createCheckout(c echo.Context) error {
	b, err := edge.ReadBody(c)
	if err != nil {
		return err
	}
	currency, err := b.Str("currency", true, 3, nil)
	if err != nil {
		return err
	}
	if !checkoutCurrencies[currency] {
		return edge.Invalid("currency", "Currency must be one of KES, USD, EUR, GBP, UGX, TZS.")
	}
	amount, ok, err := b.Amount("amount", true)
	if err != nil {
		return err
	}
	if ok && amount.Sign() <= 0 {
		return edge.Invalid("amount", "Amount must be greater than 0.")
	}
	if (currency == "UGX" || currency == "TZS") && (amount.Cmp(ugxTzsMin) < 0 || amount.Cmp(ugxTzsMax) > 0) {
		return edge.Invalid("amount", "Checkout amounts in UGX and TZS must be between 500 and 5,000,000.")
	}
	if err := s.payableAmount(currency, amount); err != nil {
		return err
	}
	email, err := b.Str("email", false, 254, emailPattern)
	if err != nil {
		return err
	}
	apiRef, err := b.Str("api_ref", false, 140, apiRefPattern)
	if err != nil {
		return err
	}
	tariffs := map[string]string{}
	for _, f := range []string{"card_tarrif", "mobile_tarrif"} {
		v, err := b.Str(f, false, 20, nil)
		if err != nil {
			return err
		}
		if v != "" && v != tariff.BusinessPays && v != tariff.CustomerPays {
			return edge.Invalid(f, f+" must be BUSINESS-PAYS or CUSTOMER-PAYS.")
		}
		tariffs[f] = tarOrDefault(v)
	}
	unique, err := b.Bool("unique_api_ref", false)
	if err != nil {
		return err
	}
	cust, err := readCustomer(b, "comment")
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
	redirect, err := readRedirectURL(b, "redirect_url")
	if err != nil {
		return err
	}
	if err := checkUnkeptCheckoutFields(b); err != nil {
		return err
	}
	p := edge.PrincipalOf(c)
	ctx := c.Request().Context()
	walletID, err := b.Str("wallet_id", false, 40, walletIDPattern)
	if err != nil {
		return err
	}
	if walletID != "" {
		if err := s.checkoutWallet(ctx, p.MerchantID, walletID); err != nil {
			return err
		}
	}
	if unique && apiRef != "" {
		co, err := storage.CheckoutByAPIRef(ctx, s.db, p.MerchantID, apiRef)
		if err == nil {
			// The public key is published in the merchant's pages, so whoever
			// asks for an api_ref is not known to be who made its session: the
			// session's customer email is shown only to a request that names it.
			if co.Email != nil && *co.Email != email {
				co.Email = nil
			}
			out, err := s.renderCheckout(c, co)
			if err != nil {
				return err
			}
			return c.JSON(http.StatusOK, out)
		}
		if !errors.Is(err, storage.ErrNotFound) {
			return err
		}
	}
	co := storage.Checkout{CheckoutID: ids.UUID(), MerchantID: p.MerchantID, Amount: &amount, Currency: currency,
		Email: optional(email), APIRef: optional(apiRef), CardTarrif: tariffs["card_tarrif"],
		MobileTarrif: tariffs["mobile_tarrif"], WalletID: optional(walletID), RedirectURL: optional(redirect),
		PhoneNumber: optional(phone), FirstName: optional(cust.FirstName), LastName: optional(cust.LastName),
		Country: optional(cust.Country), Zipcode: optional(cust.Zipcode), Address: optional(cust.Address),
		City: optional(cust.City), State: optional(cust.State), Comment: optional(cust.Comment),
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	co.UpdatedAt = co.CreatedAt
	if err := storage.InsertCheckout(ctx, s.db, co); err != nil {
		return err
	}
	out, err := s.renderCheckout(c, co)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// checkUnkeptCheckoutFields checks the fields the Python SDK also sends, often
// null: method, callback_url and version. The page offers every method and
// outcomes go to webhooks, so they are checked and not kept
// (docs/api-decisions.md).
func checkUnkeptCheckoutFields(b edge.Body) error {
	if _, err := b.Str("method", false, 20, nil); err != nil {
		return err
	}
	if _, err := readRedirectURL(b, "callback_url"); err != nil {
		return err
	}
	_, err := b.Str("version", false, 20, nil)
	return err
}

// checkoutWallet checks the wallet a checkout session (or pay request) pays into:
// one of the merchant's wallets, in KES. Every payment through a session settles
// in KES (M-Pesa and card alike, other currencies converted at the configured
// rates), and the engine credits collections to KES wallets only: a session that
// names another wallet could be created but its money never credited there.
func (s *Server) checkoutWallet(ctx context.Context, merchantID, walletID string) error {
	w, err := walletstore.Get(ctx, s.db, merchantID, walletID)
	if errors.Is(err, storage.ErrNotFound) {
		return walletNotFound()
	}
	if err != nil {
		return err
	}
	if w.Currency != tariff.Settlement {
		return edge.Invalid("wallet_id", "Checkout payments settle in KES: wallet_id must be a KES wallet (this one holds "+w.Currency+").")
	}
	return nil
}

// payableAmount refuses a fixed checkout or pay-request amount that no payment
// method could ever collect: above maxCollectionKES once converted to KES, or in
// a currency without a configured rate (UGX and TZS too: they are paid converted
// to KES). UGX and TZS also have their own range (createCheckout).
func (s *Server) payableAmount(currency string, amount money.Amount) error {
	kes, _, err := invoice.Convert(s.cfg.Rates, currency, amount)
	if err != nil {
		return priceRefusal(err)
	}
	if kes.Cmp(maxCollectionKES) > 0 {
		return edge.Invalid("amount", "Amount must be at most KES 999,999 (after conversion to KES): no payment method collects more.")
	}
	return nil
}

// checkoutFor resolves the checkout_id of a collection: the merchant's own session,
// and, when the caller authenticated with the session's signature, that very session.
func (s *Server) checkoutFor(ctx context.Context, merchantID, checkoutID string) (storage.Checkout, error) {
	co, err := storage.GetCheckout(ctx, s.db, merchantID, checkoutID)
	if errors.Is(err, storage.ErrNotFound) {
		return co, edge.NotFound("Checkout session not found.")
	}
	return co, err
}

// paymentTarget is what a payment names: currency, amount, and (optionally) the
// checkout session it pays, whose currency and fixed amount it must match.
type paymentTarget struct {
	currency   string
	amount     money.Amount
	checkoutID string
	email      string
	checkout   *storage.Checkout
}

// readPaymentTarget reads and checks currency, amount, email and checkout_id.
func (s *Server) readPaymentTarget(c echo.Context, b edge.Body) (paymentTarget, error) {
	var t paymentTarget
	var err error
	if t.currency, err = b.Str("currency", true, 3, nil); err != nil {
		return t, err
	}
	if !wallet.Currencies[t.currency] && !checkoutOnlyCurrencies[t.currency] {
		return t, edge.Invalid("currency", "Currency must be one of KES, USD, EUR, GBP.")
	}
	if t.amount, _, err = b.Amount("amount", true); err != nil {
		return t, err
	}
	if t.amount.Sign() <= 0 {
		return t, edge.Invalid("amount", "Amount must be greater than 0.")
	}
	if t.email, err = b.Str("email", false, 254, emailPattern); err != nil {
		return t, err
	}
	if t.checkoutID, err = b.Str("checkout_id", false, 64, nil); err != nil {
		return t, err
	}
	if t.checkoutID == "" {
		if checkoutOnlyCurrencies[t.currency] {
			return t, edge.Invalid("currency", t.currency+" payments are taken through a checkout session in "+t.currency+" only.")
		}
		return t, nil
	}
	co, err := s.checkoutFor(c.Request().Context(), edge.PrincipalOf(c).MerchantID, t.checkoutID)
	if err != nil {
		return t, err
	}
	if co.Currency != t.currency {
		return t, edge.Invalid("currency", "The checkout session is in "+co.Currency+".")
	}
	if co.Amount != nil && co.Amount.Sign() > 0 && !co.Amount.Equal(t.amount) {
		return t, edge.Invalid("amount", "The checkout session asks for "+co.Amount.String()+".")
	}
	if t.email == "" && co.Email != nil {
		t.email = *co.Email
	}
	t.checkout = &co
	return t, nil
}

// sessionWallet is the wallet a payment credits: the checkout session's when the
// payment names one (its own wallet_id, if any, is ignored: the hosted page is
// public and a payer must not redirect the merchant's money), else the request's
// ("" for the merchant's KES settlement wallet).
func (t paymentTarget) sessionWallet(requested string) string {
	if t.checkout == nil {
		return requested
	}
	if t.checkout.WalletID != nil {
		return *t.checkout.WalletID
	}
	return ""
}

// prefilledPhone resolves a masked phone number sent back by the hosted page: the
// checkout's own returning payer (by the session's stored email, never by one the
// request names), whose masked form must be exactly what was sent.
//
// Only the signature of that very checkout resolves a mask: it is the page's own
// flow, and its answers mask the number again (hidePayer). A public or secret key
// can name any checkout of the merchant, and one that could create a session
// with any email and pay it with the mask would learn which phone that email
// paid from (docs/security.md, "Payer data by principal"). Whoever else sends a
// mask gets the refusal of any malformed number.
func (s *Server) prefilledPhone(c echo.Context, t paymentTarget, masked string) (string, error) {
	bad := edge.Invalid("phone_number", "Enter a valid phone number in the format 254XXXXXXXXX.")
	claims, bySig := c.Get(ctxSignature).(signatureClaims)
	if t.checkout == nil || !bySignature(c) || !bySig || claims.Checkout == "" || claims.Checkout != t.checkout.CheckoutID {
		return "", bad
	}
	prev, err := s.returningPayer(c.Request().Context(), *t.checkout)
	if err != nil {
		return "", err
	}
	if prev == "" || mask(prev) != masked {
		return "", bad
	}
	return prev, nil
}

// returningPayer is the phone the checkout page offers a session's payer: the
// merchant's own record of its customer's number, else the number the session's
// stored email last paid from; "" for none.
func (s *Server) returningPayer(ctx context.Context, co storage.Checkout) (string, error) {
	if co.PhoneNumber != nil {
		return *co.PhoneNumber, nil
	}
	if co.Email == nil {
		return "", nil
	}
	return storage.PreviousPayer(ctx, s.db, co.MerchantID, *co.Email)
}

// maskedPayer is returningPayer as the checkout page shows it: masked, since the
// page is public to whoever holds its link.
func (s *Server) maskedPayer(ctx context.Context, co storage.Checkout) (string, error) {
	p, err := s.returningPayer(ctx, co)
	return mask(p), err
}

// bySignature reports whether the request authenticated with a signature (a
// capability of one checkout or invoice), not a key of the merchant.
func bySignature(c echo.Context) bool {
	p := edge.PrincipalOf(c)
	return p != nil && p.Kind == "signature"
}
