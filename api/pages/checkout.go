package pages

import (
	"net/http"

	"github.com/labstack/echo/v4"
	qrcode "github.com/skip2/go-qrcode"

	"paysvc/actors/values/money"
	"paysvc/api/edge"
	"paysvc/storage"
)

// checkoutView is the hosted checkout page's data (checkout.html).
type checkoutView struct {
	ID, Signature, Currency string
	Amount                  string // "" when the customer chooses the amount
	APIRef                  string
	Phone                   string // a returning payer's number, masked
	Paid                    bool
	Card                    bool // card payments are offered (sandbox only until a live acquirer exists)
	// Reason is the reason of the pay request that emailed the session (the spec
	// shows it on the page); found by index (migration 0032).
	Reason string
	continueLink
	// Link is the payment link a page pays (payment_link_id): the page opens its
	// checkout session when the customer pays, so ID and Signature are empty.
	Link string
}

// CheckoutPage serves the hosted checkout page of a session. The page pays and
// polls with the session's signature alone: it needs no key of the merchant.
func (p *Pages) CheckoutPage(c echo.Context) error {
	ctx := c.Request().Context()
	co, merchant, err := p.d.Checkout(c)
	if err != nil {
		return err
	}
	sig, err := p.d.Sign(ctx, co.MerchantID, co.CheckoutID)
	if err != nil {
		return err
	}
	reason, err := storage.PayRequestReason(ctx, p.d.DB, co.CheckoutID)
	if err != nil {
		return err
	}
	// A returning payer's phone is offered masked: the page is public to whoever
	// holds its link, so the full number never reaches it. Kept as is, the masked
	// value is resolved on the server from the same stored payment.
	phone, err := p.d.MaskedPayer(ctx, co)
	if err != nil {
		return err
	}
	data := checkoutView{ID: co.CheckoutID, Reason: reason, Currency: co.Currency, Paid: co.Paid, Signature: sig, Phone: phone,
		Card: p.sandbox()}
	if co.Amount != nil && co.Amount.Sign() > 0 {
		data.Amount = co.Amount.String()
	}
	if co.APIRef != nil {
		data.APIRef = *co.APIRef
	}
	data.continueLink = p.continueTo(checkoutRedirectURL(co))
	return p.renderPay(c, merchant, data)
}

// renderPay writes the checkout page, of a session or of a payment link.
func (p *Pages) renderPay(c echo.Context, merchant storage.Merchant, data checkoutView) error {
	title := "Pay in " + data.Currency
	if data.Amount != "" {
		title = "Pay " + data.Currency + " " + data.Amount
	}
	return p.render(c, "checkout", Page{Title: title, Merchant: merchant.Name, Data: data})
}

// checkoutRedirectURL is the session's redirect_url, "" when it has none.
func checkoutRedirectURL(co storage.Checkout) string {
	if co.RedirectURL == nil {
		return ""
	}
	return *co.RedirectURL
}

// closedView is the page of a link that takes no payment.
type closedView struct{ Heading, Detail string }

// LinkPage serves a payment link's hosted page: the checkout page without a
// session yet (the script opens one when the customer pays), or a page saying why
// the link takes no payment. Opening it writes nothing.
func (p *Pages) LinkPage(c echo.Context) error {
	ctx := c.Request().Context()
	l, merchant, err := p.d.Link(c)
	if err != nil {
		return err
	}
	u, err := storage.PaymentLinkUsage(ctx, p.d.DB, l.LinkID)
	if err != nil {
		return err
	}
	if e := p.d.LinkRefusal(l, u); e != nil && e.Code != "payment_link_busy" {
		heading := "This link is not accepting payments"
		if e.Code == "payment_link_limit_reached" {
			heading = "This link has reached its limit"
		}
		// 410: this address takes no payment now (ErrorPage gives the same
		// status to the session a browser would open here).
		return p.renderStatus(c, http.StatusGone, "paylink_closed", Page{Title: heading, Merchant: merchant.Name, Static: true,
			Data: closedView{Heading: heading, Detail: e.Detail + " Please contact " + merchant.Name + "."}})
	}
	data := checkoutView{Link: l.LinkID, Currency: l.Currency, Reason: l.Title, APIRef: l.Title,
		Card: p.sandbox()}
	if l.Amount > 0 {
		data.Amount = money.FromUnits(l.Amount * 100).String()
	}
	if l.RedirectURL != nil {
		data.continueLink = p.continueTo(*l.RedirectURL)
	}
	return p.renderPay(c, merchant, data)
}

// LinkQR is a payment link's QR code (its url), a PNG made on request: a few
// milliseconds, and nothing to store or keep in step when the base URL changes.
func (p *Pages) LinkQR(c echo.Context) error {
	l, _, err := p.d.Link(c)
	if err != nil {
		return err
	}
	png, err := qrcode.Encode(p.d.LinkURL(l.LinkID), qrcode.Medium, 512)
	if err != nil {
		return err
	}
	h := c.Response().Header()
	edge.PageHeaders(h)
	// The image only ever shows the link's address, fixed for the link's life.
	h.Set("Cache-Control", "public, max-age=86400")
	return c.Blob(http.StatusOK, "image/png", png)
}
