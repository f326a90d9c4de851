package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"paysvc/actors/aggregates/wallet"
	"paysvc/actors/values/money"
	"paysvc/api/edge"
	"paysvc/storage"
)

// Limits of a subscription plan (docs/api-decisions.md, "Subscriptions: plans and
// customers").
const (
	planNameMax       = 32
	planReferenceMax  = 45
	planRedirectMax   = 400 // as a payment link's redirect_url
	defaultCycles     = 11  // the spec's default billing_cycles
	maxBillingCycles  = 1000
	defaultFreqUnit   = "M"
	subscribePagePath = "/subscribe/"
)

var (
	planNamePattern = regexp.MustCompile(`^[a-zA-Z0-9]+$`)
	// maxFrequency bounds one interval between two cycles to about five years,
	// whatever the unit, so every schedule stays within ordinary date arithmetic.
	maxFrequency = map[string]int{"D": 1825, "W": 260, "M": 60, "Y": 5}
	unitNames    = map[string]string{"D": "days", "W": "weeks", "M": "months", "Y": "years"}
)

// planJSON is the Subscription plan of the interface.
type planJSON struct {
	PlanID        string       `json:"plan_id"`
	Name          string       `json:"name"`
	Amount        money.Amount `json:"amount"`
	Currency      string       `json:"currency"`
	Frequency     int          `json:"frequency"`
	FrequencyUnit string       `json:"frequency_unit"`
	BillingCycles int          `json:"billing_cycles"`
	Reference     *string      `json:"reference"`
	PlanURL       string       `json:"plan_url"`
	RedirectURL   *string      `json:"redirect_url"`
	CreatedAt     time.Time    `json:"created_at"`
	UpdatedAt     time.Time    `json:"updated_at"`
}

// planURL is the address of the plan's hosted subscribe page: built from the
// configured public root (never the request's Host), and named by the plan's
// random id, which the merchant shares with its customers.
func (s *Server) planURL(planID string) string {
	return s.cfg.PublicBaseURL + subscribePagePath + planID + "/"
}

func (s *Server) renderPlan(p storage.Plan) planJSON {
	return planJSON{PlanID: p.PlanID, Name: p.Name, Amount: p.Amount, Currency: p.Currency, Frequency: p.Frequency,
		FrequencyUnit: p.FrequencyUnit, BillingCycles: p.BillingCycles, Reference: p.Reference, PlanURL: s.planURL(p.PlanID),
		RedirectURL: p.RedirectURL, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
}

// upsertPlan is POST /subscriptions/plans/: the merchant's plan of that name is
// created, or updated in place under its own plan_id. Fields the body leaves out
// keep their stored values on an update and take their defaults on a creation.
func (s *Server) upsertPlan(c echo.Context) error {
	b, err := edge.ReadBody(c)
	if err != nil {
		return err
	}
	p := storage.Plan{MerchantID: edge.PrincipalOf(c).MerchantID}
	if p.Name, err = b.Str("name", true, planNameMax, nil); err != nil {
		return err
	}
	if !planNamePattern.MatchString(p.Name) {
		return edge.Invalid("name", "name may contain only letters and digits.")
	}
	amount, _, err := b.Amount("amount", true)
	if err != nil {
		return err
	}
	if amount.Sign() <= 0 {
		return edge.Invalid("amount", "Amount must be greater than 0.")
	}
	if p.Currency, err = b.Str("currency", true, 3, nil); err != nil {
		return err
	}
	if !wallet.Currencies[p.Currency] {
		return edge.Invalid("currency", "Currency must be one of KES, USD, EUR, GBP.")
	}
	if err := s.payableAmount(p.Currency, amount); err != nil {
		return err
	}
	p.Amount = amount
	var given []string
	unit, err := b.Str("frequency_unit", false, 1, nil)
	if err != nil {
		return err
	}
	if unit != "" {
		if maxFrequency[unit] == 0 {
			return edge.Invalid("frequency_unit", "frequency_unit must be D, W, M or Y.")
		}
		given = append(given, "frequency_unit")
	}
	p.FrequencyUnit = unit
	if unit == "" {
		p.FrequencyUnit = defaultFreqUnit // on creation; an update keeps the stored unit
	}
	if p.Frequency, _, err = b.Int("frequency", true, 0, 1, maxFrequency["D"]); err != nil {
		return err
	}
	if unit != "" && p.Frequency > maxFrequency[unit] {
		return edge.Invalid("frequency", fmt.Sprintf("frequency must be at most %d when frequency_unit is %s (%s): one interval is at most five years.",
			maxFrequency[unit], unit, unitNames[unit]))
	}
	cycles, hasCycles, err := b.Int("billing_cycles", false, defaultCycles, 1, maxBillingCycles)
	if err != nil {
		return err
	}
	p.BillingCycles = cycles
	if hasCycles {
		given = append(given, "billing_cycles")
	}
	if b.Has("reference") {
		ref, err := b.Str("reference", false, planReferenceMax, nil)
		if err != nil {
			return err
		}
		p.Reference, given = optional(ref), append(given, "reference")
	}
	if b.Has("redirect_url") {
		u, err := b.Str("redirect_url", false, planRedirectMax, nil)
		if err != nil {
			return err
		}
		if u != "" && !webURL(u) {
			return edge.Invalid("redirect_url", "redirect_url must be an absolute http or https URL.")
		}
		p.RedirectURL, given = optional(u), append(given, "redirect_url")
	}
	var saved storage.Plan
	var created bool
	err = s.redraw(c, "", func(id string) error {
		p.PlanID = id
		var err error
		saved, created, err = storage.UpsertPlan(c.Request().Context(), s.db, p, given)
		return err
	})
	if errors.Is(err, storage.ErrFrequencyBound) {
		// The body left the unit out and the stored plan's unit is shorter than the
		// frequency asked (the database checks it against the unit the row will have).
		return edge.Invalid("frequency", "frequency is too long for the plan's frequency_unit: one interval is at most 1825 days, 260 weeks, 60 months or 5 years.")
	}
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, s.renderPlan(saved))
}

// webURL reports whether u is an absolute http or https URL with a host and no
// credentials or blanks: a place to send a browser, nothing else.
func webURL(u string) bool {
	if strings.ContainsAny(u, " \t\r\n\\") {
		return false
	}
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != "" && p.User == nil
}

func (s *Server) listPlans(c echo.Context) error {
	return listOwn(s, c, storage.ListPlans, s.renderPlan)
}

func (s *Server) getPlan(c echo.Context) error {
	p, err := storage.GetPlan(c.Request().Context(), s.db, edge.PrincipalOf(c).MerchantID, c.Param("plan_id"))
	if errors.Is(err, storage.ErrNotFound) {
		return edge.NotFound("Plan not found.")
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.renderPlan(p))
}
