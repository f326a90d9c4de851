package api

import (
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"paysvc/actors/aggregates/subscription"
	"paysvc/api/edge"
	"paysvc/storage"
)

// A plan's subscribe page (package api/pages, at the plan's plan_url) posts here:
// anyone the merchant sends there becomes a customer with a PENDING subscription
// and is sent on to its setup page. The plan's random id is the capability.

// planSubscribe is POST /subscribe/{plan_id}/ (no credential): the customer's
// email, names and optionally country and zipcode. The merchant's customer with
// that email is created when new and used as stored when it exists (a public
// caller never rewrites a record, as linkPayer), then a PENDING subscription on
// the plan starting today is created by the secret-key API's own command; the
// answer is its setup_url. Nothing is charged until a card is set up there.
func (s *Server) planSubscribe(c echo.Context) error {
	ctx := c.Request().Context()
	p, m, err := plans.open(s, c)
	if err != nil {
		return err
	}
	if s.cfg.Environment != "sandbox" {
		// A subscription whose card cannot be set up would only wait forever.
		return edge.ClientError(http.StatusBadRequest, "method_unavailable", "Subscribing is not available on this server yet: no card acquirer is connected.")
	}
	b, err := edge.ReadBody(c)
	if err != nil {
		return err
	}
	u := storage.CustomerUpsert{MerchantID: m.MerchantID, Fields: map[string]*string{}}
	if u.Email, err = b.Str("email", true, emailMax, nil); err != nil {
		return err
	}
	if !emailPattern.MatchString(u.Email) {
		return edge.Invalid("email", "Enter a valid email address.")
	}
	for _, f := range []string{"first_name", "last_name"} {
		v, err := b.Str(f, true, customerNameMax, namePattern)
		if err != nil {
			return err
		}
		u.Fields[f] = &v
	}
	country, err := b.Str("country", false, 2, nil)
	if err != nil {
		return err
	}
	zipcode, err := b.Str("zipcode", false, zipcodeMax, zipcodePattern)
	if err != nil {
		return err
	}
	if country != "" {
		country = strings.ToUpper(country)
		if !iso3166[country] {
			return edge.Invalid("country", "country must be an ISO 3166-1 alpha-2 code, e.g. KE, US, GB.")
		}
		if (country == "US" || country == "CA" || country == "GB") && zipcode == "" {
			return errZipcodeRequired
		}
		u.Fields["country"] = &country
	}
	if zipcode != "" {
		u.Fields["zipcode"] = &zipcode
	}
	var cu storage.Customer
	err = s.redraw(c, "", func(id string) error {
		u.NewID = id
		var err error
		cu, _, err = storage.CreateCustomerIfAbsent(ctx, s.db, u)
		return err
	})
	if err != nil {
		return err
	}
	// The command is the merchant's, issued for it as the setup endpoint does.
	edge.SetPrincipal(c, &edge.Principal{MerchantID: m.MerchantID, Kind: "subscribe"})
	st, err := replied[subscription.State](s.issueSubscriptionCreate(c, m.MerchantID, newSubscription{plan: p, customer: cu,
		start: subscription.Today(time.Now()), redirect: deref(p.RedirectURL)}))
	if err != nil {
		return err
	}
	tok, err := s.setupToken(ctx, st.SubscriptionID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]any{"subscription_id": st.SubscriptionID, "status": st.Status,
		"setup_url": s.cfg.PublicBaseURL + setupPagePath + tok + "/"})
}
