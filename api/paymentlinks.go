package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"paysvc/actors/aggregates/invoice"
	"paysvc/actors/aggregates/tariff"
	"paysvc/actors/aggregates/wallet"
	"paysvc/actors/values/ids"
	"paysvc/actors/values/money"
	"paysvc/api/edge"
	"paysvc/storage"
	"paysvc/topics"
)

// Payment links (docs/api-decisions.md, "Payment links"): a merchant's reusable
// hosted page at /pay/{id}/. Each customer who pays through it gets a checkout
// session of their own, opened with the link's terms, and pays that session as the
// checkout page does: pricing, tariffs, status and redirect are the checkout's.

// maxUsageLimit bounds usage_limit (a bigint column; no link is paid a billion times).
const maxUsageLimit = 1_000_000_000

type paymentLinkJSON struct {
	ID           string    `json:"id"`
	Title        string    `json:"title"`
	IsActive     bool      `json:"is_active"`
	RedirectURL  *string   `json:"redirect_url"`
	Amount       int64     `json:"amount"`
	UsageLimit   int64     `json:"usage_limit"`
	QRCodeFile   string    `json:"qrcode_file"`
	URL          string    `json:"url"`
	Currency     string    `json:"currency"`
	MobileTarrif string    `json:"mobile_tarrif"`
	CardTarrif   string    `json:"card_tarrif"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

func (s *Server) linkURL(id string) string { return s.cfg.PublicBaseURL + "/pay/" + id + "/" }

func (s *Server) renderLink(l storage.PaymentLink) paymentLinkJSON {
	return paymentLinkJSON{ID: l.LinkID, Title: l.Title, IsActive: l.IsActive, RedirectURL: l.RedirectURL, Amount: l.Amount,
		UsageLimit: l.UsageLimit, QRCodeFile: s.linkURL(l.LinkID) + "qr.png", URL: s.linkURL(l.LinkID), Currency: l.Currency,
		MobileTarrif: l.MobileTarrif, CardTarrif: l.CardTarrif, CreatedAt: l.CreatedAt, UpdatedAt: l.UpdatedAt}
}

// readLinkFields applies the body's fields to l: every field present is checked
// and set, absent ones keep l's value (create starts from the defaults). A full
// representation (create, PUT) always has a title.
func (s *Server) readLinkFields(b edge.Body, l *storage.PaymentLink, full bool) error {
	if full || b.Has("title") {
		t, err := b.Str("title", true, 140, namePattern)
		if err != nil {
			return err
		}
		l.Title = t
	}
	if b.Has("is_active") {
		v, err := b.Bool("is_active", true)
		if err != nil {
			return err
		}
		l.IsActive = v
	}
	if _, ok := b["redirect_url"]; ok {
		// null or "" clears it.
		v, err := readRedirectURL(b, "redirect_url")
		if err != nil {
			return err
		}
		l.RedirectURL = optional(v)
	}
	if b.Has("currency") {
		v, err := b.Str("currency", true, 3, nil)
		if err != nil {
			return err
		}
		// A link's currencies are a payment's (UGX and TZS are taken through a
		// checkout session in that currency only: readPaymentTarget).
		if !wallet.Currencies[v] {
			return edge.Invalid("currency", "Currency must be one of KES, USD, EUR, GBP.")
		}
		l.Currency = v
	}
	if b.Has("amount") {
		a, _, err := b.Amount("amount", true)
		if err != nil {
			return err
		}
		cents, err := a.Cents()
		if err != nil || a.Sign() < 0 {
			return edge.Invalid("amount", "Amount must be 0 (the customer enters it) or greater.")
		}
		if cents%100 != 0 {
			return edge.Invalid("amount", "Amount must be a whole number of "+l.Currency+" (no cents).")
		}
		l.Amount = cents / 100
	}
	if b.Has("usage_limit") {
		n, _, err := b.Int("usage_limit", true, 0, 0, maxUsageLimit)
		if err != nil {
			return err
		}
		l.UsageLimit = int64(n)
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"mobile_tarrif", &l.MobileTarrif}, {"card_tarrif", &l.CardTarrif}} {
		if !b.Has(f.name) {
			continue
		}
		v, err := b.Str(f.name, true, 20, nil)
		if err != nil {
			return err
		}
		if v != tariff.BusinessPays && v != tariff.CustomerPays {
			return edge.Invalid(f.name, f.name+" must be BUSINESS-PAYS or CUSTOMER-PAYS.")
		}
		*f.dst = v
	}
	// A fixed amount must be one some method can collect, in the link's currency
	// (checked on the result, so a currency change re-checks the kept amount).
	if l.Amount > 0 {
		return s.payableAmount(l.Currency, money.FromUnits(l.Amount*100))
	}
	return nil
}

// paymentLinkID is the link a payment's checkout session was opened for, "" if none.
func (t paymentTarget) paymentLinkID() string {
	if t.checkout == nil || t.checkout.PaymentLinkID == nil {
		return ""
	}
	return *t.checkout.PaymentLinkID
}

// createPaymentLink creates a link (the Python SDK's paymentlinks.create).
func (s *Server) createPaymentLink(c echo.Context) error {
	b, err := edge.ReadBody(c)
	if err != nil {
		return err
	}
	l := storage.PaymentLink{LinkID: ids.UUID(), MerchantID: edge.PrincipalOf(c).MerchantID, IsActive: true, Currency: "KES",
		MobileTarrif: tariff.BusinessPays, CardTarrif: tariff.BusinessPays, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	if err := s.readLinkFields(b, &l, true); err != nil {
		return err
	}
	l.UpdatedAt = l.CreatedAt
	if err := storage.InsertPaymentLink(c.Request().Context(), s.db, l); err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, s.renderLink(l))
}

func (s *Server) listPaymentLinks(c echo.Context) error {
	return listOwn(s, c, storage.ListPaymentLinks, s.renderLink)
}

func linkNotFound() *edge.Error { return edge.NotFound("Payment link not found.") }

func (s *Server) getPaymentLink(c echo.Context) error {
	l, err := storage.GetPaymentLink(c.Request().Context(), s.db, edge.PrincipalOf(c).MerchantID, c.Param("link_id"))
	if errors.Is(err, storage.ErrNotFound) {
		return linkNotFound()
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.renderLink(l))
}

// updatePaymentLink is PATCH and PUT: both change only the fields sent; PUT also
// requires title, as a full representation always has it.
func (s *Server) updatePaymentLink(c echo.Context) error {
	b, err := edge.ReadBody(c)
	if err != nil {
		return err
	}
	full := c.Request().Method == http.MethodPut
	if full {
		// Checked before the link is read: a PUT without a title is refused as such,
		// whether or not the link exists.
		if _, err := b.Str("title", true, 140, namePattern); err != nil {
			return err
		}
	}
	return s.changeLink(c, func(l *storage.PaymentLink) error { return s.readLinkFields(b, l, full) })
}

// deactivatePaymentLink stops a link taking payments (is_active false); payments
// already started finish. PATCH is_active true turns it back on.
func (s *Server) deactivatePaymentLink(c echo.Context) error {
	return s.changeLink(c, func(l *storage.PaymentLink) error { l.IsActive = false; return nil })
}

func (s *Server) changeLink(c echo.Context, change func(*storage.PaymentLink) error) error {
	l, err := storage.UpdatePaymentLink(c.Request().Context(), s.db, edge.PrincipalOf(c).MerchantID, c.Param("link_id"), change)
	if errors.Is(err, storage.ErrNotFound) {
		return linkNotFound()
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.renderLink(l))
}

// linkRefusal says why a link takes no payment now, nil when it does. Payments in
// flight (within their storage.LinkHolds) count against the limit: they may still
// complete.
func linkRefusal(l storage.PaymentLink, u storage.LinkUsage) *edge.Error {
	if !l.IsActive {
		return edge.ClientError(http.StatusBadRequest, "payment_link_inactive", "This payment link is not accepting payments.")
	}
	if l.UsageLimit > 0 && u.Completed >= l.UsageLimit {
		return edge.ClientError(http.StatusBadRequest, "payment_link_limit_reached", "This payment link has reached its limit of payments.")
	}
	if l.UsageLimit > 0 && u.Completed+u.InFlight >= l.UsageLimit {
		return edge.ClientError(http.StatusBadRequest, "payment_link_busy",
			"Other payments through this link are in progress and would reach its limit. Please try again in a few minutes.")
	}
	return nil
}

// paymentLinkSession opens the checkout session one customer pays a link through
// (POST /pay/{id}/session/, no credential: the link's id is the capability; the
// link's session budgets bound how many a client and everyone open, linklimits.go).
// The session carries the link's terms; the answer is what the page needs to pay it.
func (s *Server) paymentLinkSession(c echo.Context) error {
	ctx := c.Request().Context()
	l, _, err := paymentLinks.open(s, c)
	if err != nil {
		return err
	}
	if err := s.linkSession(c, l.LinkID); err != nil {
		return err
	}
	u, err := storage.PaymentLinkUsageWithin(ctx, s.db, l.LinkID, s.cfg.LinkHolds)
	if err != nil {
		return err
	}
	if e := linkRefusal(l, u); e != nil {
		return e
	}
	amount := money.FromUnits(l.Amount * 100)
	co := storage.Checkout{CheckoutID: ids.UUID(), MerchantID: l.MerchantID, Amount: &amount, Currency: l.Currency,
		APIRef: optional(l.Title), CardTarrif: l.CardTarrif, MobileTarrif: l.MobileTarrif, RedirectURL: l.RedirectURL,
		PaymentLinkID: &l.LinkID, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	co.UpdatedAt = co.CreatedAt
	if err := storage.InsertCheckout(ctx, s.db, co); err != nil {
		return err
	}
	sig, err := s.checkoutSignature(ctx, co.MerchantID, co.CheckoutID)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, map[string]string{"checkout_id": co.CheckoutID, "signature": sig})
}

// linkUse is a payment's hold on its link's usage_limit (openInvoice).
type linkUse struct {
	s                 *Server
	c                 echo.Context
	linkID, commandID string
}

// reserveLinkUse holds a use of the link a payment goes through, under the link's
// row lock, refusing when the link's prompt budgets are spent (429), the link is
// inactive, its limit is taken, or the session was opened with terms the link no
// longer has. nil without a link. The use holds for the bounded times of
// Config.LinkHolds: until the rail accepts the prompt, and then until its outcome.
func (s *Server) reserveLinkUse(c echo.Context, cmd topics.InvoiceSTKPush) (*linkUse, error) {
	if cmd.PaymentLinkID == "" {
		return nil, nil
	}
	if err := s.linkPrompt(c, cmd.PaymentLinkID); err != nil {
		return nil, err
	}
	ctx := c.Request().Context()
	co, err := storage.GetCheckout(ctx, s.db, edge.PrincipalOf(c).MerchantID, cmd.CheckoutID)
	if err != nil {
		return nil, err
	}
	// The command id the payment will be produced with: set here when the request
	// has no Idempotency-Key, so issue uses the same one.
	id, _ := c.Get(ctxCommandID).(string)
	if id == "" {
		id = ids.UUID()
		c.Set(ctxCommandID, id)
	}
	err = storage.ReserveLinkUse(ctx, s.db, cmd.PaymentLinkID, id, cmd.InvoiceID, s.cfg.LinkHolds, func(l storage.PaymentLink, u storage.LinkUsage) error {
		if e := linkRefusal(l, u); e != nil {
			return e
		}
		if co.Amount == nil || !co.Amount.Equal(money.FromUnits(l.Amount*100)) || co.Currency != l.Currency ||
			co.MobileTarrif != l.MobileTarrif || co.CardTarrif != l.CardTarrif {
			return edge.ClientError(http.StatusConflict, "payment_link_changed",
				"The payment link was changed since this page was opened. Please reload the page.")
		}
		return nil
	})
	if errors.Is(err, storage.ErrNotFound) {
		return nil, linkNotFound()
	}
	if err != nil {
		return nil, err
	}
	return &linkUse{s: s, c: c, linkID: cmd.PaymentLinkID, commandID: id}, nil
}

// settled points the use at the invoice the engine answered with.
func (u *linkUse) settled(inv invoice.State) {
	if u == nil {
		return
	}
	if err := storage.SettleLinkUse(u.c.Request().Context(), u.s.db, u.linkID, u.commandID, inv.InvoiceID); err != nil {
		// The use stays on the generated id: it counts as in flight for LinkHolds.Send.
		u.s.log.Error("settle payment link use", "request_id", edge.RequestID(u.c), "err", err)
	}
}

// refused frees the use of a payment the engine refused (no invoice will exist).
func (u *linkUse) refused() {
	if u == nil {
		return
	}
	if err := storage.ReleaseLinkUse(u.c.Request().Context(), u.s.db, u.linkID, u.commandID); err != nil {
		u.s.log.Error("release payment link use", "request_id", edge.RequestID(u.c), "err", err)
	}
}

// sessionLink is the Payment session's payment_link of an invoice (nil: none).
// Only a principal that may read payment links (a secret key with
// view_collections) gets it: the link's configuration (usage limit, tariffs,
// state) is the merchant's, and neither the hosted page (a signature) nor a
// public-key caller uses it.
func (s *Server) sessionLink(c echo.Context, inv invoice.State) (*paymentLinkJSON, error) {
	if inv.PaymentLinkID == "" || !seesPayers(c) {
		return nil, nil
	}
	l, err := storage.GetPaymentLink(c.Request().Context(), s.db, inv.MerchantID, inv.PaymentLinkID)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := s.renderLink(l)
	return &out, nil
}
