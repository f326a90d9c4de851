package pages

import (
	"strconv"

	"github.com/labstack/echo/v4"

	"paysvc/actors/aggregates/subscription"
	"paysvc/storage"
)

// The customer's subscription pages (docs/api-decisions.md, "Hosted pages"): the
// setup page at a subscription's setup_url, where the customer gives the card the
// cycles are charged to, and a plan's subscribe page at its plan_url, where anyone
// the merchant sends there becomes a customer with a PENDING subscription (the
// page's form posts to the server's JSON endpoint) and is sent on to its setup
// page. Both are public; the setup token and the plan's random id are what the
// merchant shares.

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
	continueLink
}

// SetupPage serves GET /subscriptions/setup/{token}/.
func (p *Pages) SetupPage(c echo.Context) error {
	ctx := c.Request().Context()
	st, m, err := p.d.Setup(c)
	if err != nil {
		return err
	}
	// The plan's current terms: a plan change applies from the next cycle, which for
	// a subscription still waiting for its card is the first.
	pl, err := storage.GetPlan(ctx, p.d.DB, st.MerchantID, st.Plan.PlanID)
	if err != nil {
		return err
	}
	v := setupView{planTerms: termsOf(pl), Token: c.Param("token"), SubscriptionID: st.SubscriptionID, Status: st.Status,
		FirstCharge: longDate(st.NextDate), NextCharge: longDate(st.NextDate), Card: st.CardNumber,
		Sandbox: p.sandbox(), ChallengeCode: p.cfg.ChallengeCode}
	v.continueLink = p.continueTo(st.RedirectURL)
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
	return p.render(c, "subscription_setup", Page{Title: title, Merchant: m.Name, Data: v})
}

// subscribeView is the plan subscribe page.
type subscribeView struct {
	planTerms
	PlanID      string
	Unavailable bool
}

// SubscribePage serves GET /subscribe/{plan_id}/. Opening it writes nothing.
func (p *Pages) SubscribePage(c echo.Context) error {
	pl, m, err := p.d.Plan(c)
	if err != nil {
		return err
	}
	v := subscribeView{planTerms: termsOf(pl), PlanID: pl.PlanID, Unavailable: !p.sandbox()}
	return p.render(c, "subscribe", Page{Title: "Subscribe to " + pl.Name, Merchant: m.Name, Data: v})
}
