package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"paysvc/actors/aggregates/subscription"
	"paysvc/api/edge"
	"paysvc/api/pages"
	"paysvc/storage"
)

// The customer's subscription pages (docs/api-decisions.md, "Hosted pages"): the
// setup page at a subscription's setup_url, where the customer gives the card the
// cycles are charged to, and a plan's subscribe page at its plan_url, where anyone
// the merchant sends there becomes a customer with a PENDING subscription and is
// sent on to its setup page. Both are public; the setup token and the plan's random
// id are what the merchant shares.

// planTerms is what both pages say about a plan: what is charged, how often, how
// many times.
type planTerms struct {
	PlanName string
	Amount   string // "KES 1500.00"
	Every    string // "every month", "every 2 weeks"
	Cycles   string // "12 payments"
}

var unitWords = map[string][2]string{"D": {"day", "days"}, "W": {"week", "weeks"}, "M": {"month", "months"}, "Y": {"year", "years"}}

func termsOf(p storage.Plan) planTerms {
	w := unitWords[p.FrequencyUnit]
	every := "every " + w[0]
	if p.Frequency != 1 {
		every = "every " + strconv.Itoa(p.Frequency) + " " + w[1]
	}
	cycles := strconv.Itoa(p.BillingCycles) + " payments"
	if p.BillingCycles == 1 {
		cycles = "1 payment"
	}
	return planTerms{PlanName: p.Name, Amount: p.Currency + " " + p.Amount.String(), Every: every, Cycles: cycles}
}

var monthNames = [...]string{"January", "February", "March", "April", "May", "June", "July", "August", "September",
	"October", "November", "December"}

// longDate writes a YYYY-MM-DD date as "31 January 2025" (no ambiguity between
// day-first and month-first readers); "" stays "".
func longDate(d string) string {
	t, err := subscription.ParseDate(d)
	if err != nil {
		return d
	}
	return strconv.Itoa(t.Day()) + " " + monthNames[t.Month()-1] + " " + strconv.Itoa(t.Year())
}

// setupView is the setup page: the form while the subscription takes a card, or a
// screen saying where it stands.
type setupView struct {
	planTerms
	Token          string
	SubscriptionID string
	Status         string
	Form           bool // PENDING or FAILED, in the sandbox
	Unavailable    bool // would take a card, but no card acquirer is connected (live)
	Retry          bool // FAILED: a new card keeps the subscription going
	FirstCharge    string
	NextCharge     string
	Card           string // the masked card on file
	Heading        string // the status screen's
	Detail         string
	Sandbox        bool
	ChallengeCode  string
	RedirectURL    string
	RedirectHost   string
}

// subscriptionSetupPage serves GET /subscriptions/setup/{token}/.
func (s *Server) subscriptionSetupPage(c echo.Context) error {
	ctx := c.Request().Context()
	st, err := s.setupSubscription(c)
	if err != nil {
		return err
	}
	m, err := capabilityOwner(c, st.MerchantID, capSetupToken)
	if err != nil {
		return err
	}
	// The plan's current terms: a plan change applies from the next cycle, which for
	// a subscription still waiting for its card is the first.
	p, err := storage.GetPlan(ctx, s.db, st.MerchantID, st.Plan.PlanID)
	if err != nil {
		return err
	}
	v := setupView{planTerms: termsOf(p), Token: c.Param("token"), SubscriptionID: st.SubscriptionID, Status: st.Status,
		FirstCharge: longDate(st.NextDate), NextCharge: longDate(st.NextDate), Card: st.CardNumber,
		Sandbox: s.cfg.Environment == "sandbox", ChallengeCode: SandboxChallengeCode}
	v.RedirectURL, v.RedirectHost = s.pageRedirect(st.RedirectURL)
	takesCard := st.Status == subscription.StatusPending || st.Status == subscription.StatusFailed
	switch {
	case takesCard && !v.Sandbox:
		v.Unavailable = true
		v.Heading = "Card setup is not available"
		v.Detail = "This service cannot take cards yet, so the subscription cannot start here. Nothing was charged. Please contact " +
			m.Name + "."
	case takesCard:
		v.Form = true
		v.Retry = st.Status == subscription.StatusFailed
	case st.Status == subscription.StatusActive:
		v.Heading = "Subscription active"
		v.Detail = "Your card " + st.CardNumber + " is charged " + v.Amount + " " + v.Every + "."
	case st.Status == subscription.StatusComplete:
		v.Heading = "Subscription complete"
		v.Detail = "All " + v.Cycles + " have been made. Nothing more will be charged."
	default: // CANCELED
		v.Heading = "Subscription canceled"
		v.Detail = "This subscription was canceled. Nothing more will be charged."
	}
	title := "Set up your subscription"
	if v.Heading != "" {
		title = v.Heading
	}
	return s.renderPage(c, "subscription_setup", pages.Page{Title: title, Merchant: m.Name, Data: v})
}

// subscribeView is the plan subscribe page.
type subscribeView struct {
	planTerms
	PlanID      string
	Unavailable bool
}

// publicPlan is the plan a public path names, with its merchant. An unknown or
// malformed id, a plan of a disabled merchant, or one of the other environment's
// merchant is 404 (one answer for all; bindCapability refused the last two before
// this handler ran). The environment matters most: a sandbox server sets cards up
// with test numbers and charges them on its simulator, so a live merchant's plan
// subscribed to there would credit real wallets with test money.
func (s *Server) publicPlan(c echo.Context) (storage.Plan, storage.Merchant, error) {
	id := c.Param("plan_id")
	if !planIDPattern.MatchString(id) {
		return storage.Plan{}, storage.Merchant{}, edge.NotFound(capPlan.missing)
	}
	p, err := storage.PlanByID(c.Request().Context(), s.db, id)
	if errors.Is(err, storage.ErrNotFound) {
		return p, storage.Merchant{}, edge.NotFound(capPlan.missing)
	}
	if err != nil {
		return p, storage.Merchant{}, err
	}
	m, err := capabilityOwner(c, p.MerchantID, capPlan)
	return p, m, err
}

// planSubscribePage serves GET /subscribe/{plan_id}/. Opening it writes nothing.
func (s *Server) planSubscribePage(c echo.Context) error {
	p, m, err := s.publicPlan(c)
	if err != nil {
		return err
	}
	v := subscribeView{planTerms: termsOf(p), PlanID: p.PlanID, Unavailable: s.cfg.Environment != "sandbox"}
	return s.renderPage(c, "subscribe", pages.Page{Title: "Subscribe to " + p.Name, Merchant: m.Name, Data: v})
}

// planSubscribe is POST /subscribe/{plan_id}/ (no credential): the customer's
// email, names and optionally country and zipcode. The merchant's customer with
// that email is created when new and used as stored when it exists (a public
// caller never rewrites a record, as linkPayer), then a PENDING subscription on
// the plan starting today is created by the secret-key API's own command; the
// answer is its setup_url. Nothing is charged until a card is set up there.
func (s *Server) planSubscribe(c echo.Context) error {
	ctx := c.Request().Context()
	p, m, err := s.publicPlan(c)
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
	r, err := s.issueSubscriptionCreate(c, m.MerchantID, newSubscription{plan: p, customer: cu,
		start: subscription.Today(time.Now()), redirect: deref(p.RedirectURL)})
	if err != nil {
		return err
	}
	if r.Error != nil {
		return refusal(r.Error)
	}
	var st subscription.State
	if err := json.Unmarshal(r.Result, &st); err != nil {
		return err
	}
	tok, err := s.setupToken(ctx, st.SubscriptionID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]any{"subscription_id": st.SubscriptionID, "status": st.Status,
		"setup_url": s.cfg.PublicBaseURL + setupPagePath + tok + "/"})
}
