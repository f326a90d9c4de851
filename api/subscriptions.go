package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"

	"paysvc/actors/aggregates/subscription"
	"paysvc/actors/aggregates/subscription/subscriptionstore"
	"paysvc/actors/aggregates/wallet/walletstore"
	"paysvc/actors/rails/card"
	"paysvc/actors/values/ids"
	"paysvc/api/edge"
	"paysvc/storage"
	"paysvc/topics"
)

// Subscriptions (docs/api-decisions.md, "Subscriptions: billing"): the engine's
// subscription aggregate (actors/aggregates/subscription, registered by
// actors/aggregates/subscription/subscriptionkind) decides; these handlers read, check the
// request and issue its commands. Cycles are issued by the scheduler
// (actors/aggregates/subscription/scheduler), never by a request.

const (
	setupPagePath = "/subscriptions/setup/"
	// SandboxChallengeCode completes the sandbox card that asks for a challenge
	// step at setup (docs/sandbox.md).
	SandboxChallengeCode = "123456"
	// Sandbox test cards of subscription setup beyond card.TestOutcome's.
	cardChallenge     = "4000000000003220" // setup asks for a challenge step
	cardDeclineCharge = "4000000000000341" // sets up, every charge declined
)

var (
	planIDPattern     = regexp.MustCompile(`^[A-Za-z0-9]{1,40}$`)
	setupTokenPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)
)

// setupKey derives setup tokens: HMAC-SHA256(service secret, subscription id). The
// token is stable (GET shows the same setup_url while the subscription waits for a
// card) and nothing secret is stored: the row keeps only the token's SHA-256, by
// which the setup endpoint finds the subscription. Each Server has its own
// (Server.setupKey), read once from its database.
type setupKey struct {
	mu  sync.Mutex
	key []byte
}

func (s *Server) setupToken(ctx context.Context, subscriptionID string) (string, error) {
	k := &s.setupKey
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.key == nil {
		key, err := storage.ServiceSecret(ctx, s.db, "subscription_setup")
		if err != nil {
			return "", err
		}
		k.key = key
	}
	m := hmac.New(sha256.New, k.key)
	m.Write([]byte("subscription-setup\x00" + subscriptionID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)), nil
}

func tokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

type subscriptionJSON struct {
	SubscriptionID  string              `json:"subscription_id"`
	ID              string              `json:"id"`
	Status          string              `json:"status"`
	StartDate       string              `json:"start_date"`
	NextDate        *string             `json:"next_date"`
	CompletedCycles int                 `json:"completed_cycles"`
	FailReason      *string             `json:"fail_reason"`
	SetupURL        *string             `json:"setup_url"`
	Customer        *customerRecordJSON `json:"customer"`
	Plan            *planJSON           `json:"plan"`
	PaymentMethod   string              `json:"payment_method"`
	CardNumber      *string             `json:"card_number"`
	CardNetwork     *string             `json:"card_network"`
	Reference       *string             `json:"reference"`
	RedirectURL     *string             `json:"redirect_url"`
	TestClockID     *string             `json:"test_clock_id"`
	CreatedAt       time.Time           `json:"created_at"`
	UpdatedAt       time.Time           `json:"updated_at"`
}

// seesSetupURL: setup_url is the capability to set or replace the card, so only a
// secret key that may change subscriptions sees it (the unrestricted key, or one
// holding change_subscriptions); a view_subscriptions key gets null
// (docs/security.md, "Permissions of restricted keys").
func seesSetupURL(c echo.Context) bool {
	p := edge.PrincipalOf(c)
	return p != nil && p.Kind == "secret" && p.Can(edge.PermChangeSubscriptions)
}

// renderSubscription shows a subscription with its plan and customer records
// (read now; nil if gone). setup_url is shown while a card can be set up, and
// only to a caller that may change subscriptions (seesSetupURL).
func (s *Server) renderSubscription(c echo.Context, st subscription.State) (subscriptionJSON, error) {
	ctx := c.Request().Context()
	out := subscriptionJSON{SubscriptionID: st.SubscriptionID, ID: st.SubscriptionID, Status: st.Status, StartDate: st.StartDate,
		NextDate: optional(st.NextDate), CompletedCycles: st.CompletedCycles, PaymentMethod: "CARD-PAYMENT",
		CardNumber: optional(st.CardNumber), CardNetwork: optional(st.CardNetwork), Reference: optional(st.Reference),
		RedirectURL: optional(st.RedirectURL), TestClockID: optional(st.TestClockID), CreatedAt: st.CreatedAt.UTC(),
		UpdatedAt: st.UpdatedAt.UTC()}
	if st.ShowsFailReason() {
		out.FailReason = optional(st.FailReason)
	}
	if (st.Status == subscription.StatusPending || st.Status == subscription.StatusFailed) && seesSetupURL(c) {
		tok, err := s.setupToken(ctx, st.SubscriptionID)
		if err != nil {
			return out, err
		}
		u := s.cfg.PublicBaseURL + setupPagePath + tok + "/"
		out.SetupURL = &u
	}
	if p, err := storage.GetPlan(ctx, s.db, st.MerchantID, st.Plan.PlanID); err == nil {
		pj := s.renderPlan(p)
		out.Plan = &pj
	} else if !errors.Is(err, storage.ErrNotFound) {
		return out, err
	}
	if cu, err := storage.GetCustomer(ctx, s.db, st.MerchantID, st.CustomerID); err == nil {
		cj := renderCustomer(cu)
		out.Customer = &cj
	} else if !errors.Is(err, storage.ErrNotFound) {
		return out, err
	}
	return out, nil
}

// subscriptionReply renders the state an engine reply carries.
func (s *Server) subscriptionReply(c echo.Context, r topics.Reply, status int) error {
	st, err := replied[subscription.State](r, nil)
	if err != nil {
		return err
	}
	out, err := s.renderSubscription(c, st)
	if err != nil {
		return err
	}
	return c.JSON(status, out)
}

// today is the date (EAT) a subscription's dates are checked against: its test
// clock's, or the wall clock's.
func (s *Server) today(ctx context.Context, merchantID, clockID string) (string, error) {
	if clockID == "" {
		return subscription.Today(time.Now()), nil
	}
	tc, err := storage.GetTestClock(ctx, s.db, merchantID, clockID)
	if err != nil {
		return "", err
	}
	return subscription.Today(tc.FrozenTime), nil
}

// readDate reads an optional YYYY-MM-DD date that must be today or later.
func readDate(b edge.Body, field, today string) (string, error) {
	d, err := b.Str(field, false, 10, nil)
	if err != nil || d == "" {
		return "", err
	}
	if _, err := subscription.ParseDate(d); err != nil {
		return "", edge.Invalid(field, field+" must be a date as YYYY-MM-DD.")
	}
	if d < today {
		return "", edge.Invalid(field, field+" must be today ("+today+", Africa/Nairobi) or later.")
	}
	return d, nil
}

func (s *Server) bodyPlan(ctx context.Context, merchantID string, b edge.Body, required bool) (*storage.Plan, error) {
	id, err := b.Str("plan_id", required, 40, nil)
	if err != nil || id == "" {
		return nil, err
	}
	p, err := storage.GetPlan(ctx, s.db, merchantID, id)
	if errors.Is(err, storage.ErrNotFound) || (err == nil && !planIDPattern.MatchString(id)) {
		return nil, edge.Invalid("plan_id", "No plan of yours has this plan_id.")
	}
	if err != nil {
		return nil, err
	}
	return &p, nil
}

func subPlan(p storage.Plan) topics.SubscriptionPlan {
	return topics.SubscriptionPlan{PlanID: p.PlanID, Frequency: p.Frequency, FrequencyUnit: p.FrequencyUnit, BillingCycles: p.BillingCycles}
}

func subTerms(p storage.Plan) topics.SubscriptionTerms {
	return topics.SubscriptionTerms{Name: p.Name, Amount: p.Amount.String(), Currency: p.Currency}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (s *Server) createSubscription(c echo.Context) error {
	ctx := c.Request().Context()
	merchant := edge.PrincipalOf(c).MerchantID
	b, err := edge.ReadBody(c)
	if err != nil {
		return err
	}
	plan, err := s.bodyPlan(ctx, merchant, b, true)
	if err != nil {
		return err
	}
	custID, err := b.Str("customer_id", true, 40, nil)
	if err != nil {
		return err
	}
	cu, err := storage.GetCustomer(ctx, s.db, merchant, custID)
	if errors.Is(err, storage.ErrNotFound) {
		return edge.Invalid("customer_id", "No customer of yours has this customer_id.")
	}
	if err != nil {
		return err
	}
	reference, err := b.Str("reference", false, 45, nil)
	if err != nil {
		return err
	}
	redirect, err := b.Str("redirect_url", false, 2048, nil)
	if err != nil {
		return err
	}
	if redirect != "" && !webURL(redirect) {
		return edge.Invalid("redirect_url", "redirect_url must be an http(s) address.")
	}
	if redirect == "" {
		redirect = deref(plan.RedirectURL)
	}
	clockID, err := b.Str("test_clock_id", false, 40, nil)
	if err != nil {
		return err
	}
	if clockID != "" && s.cfg.Environment != "sandbox" {
		return edge.Invalid("test_clock_id", "Test clocks exist only in the sandbox.")
	}
	today, err := s.today(ctx, merchant, clockID)
	if errors.Is(err, storage.ErrNotFound) {
		return edge.Invalid("test_clock_id", "No test clock of yours has this test_clock_id.")
	}
	if err != nil {
		return err
	}
	start, err := readDate(b, "start_date", today)
	if err != nil {
		return err
	}
	if start == "" {
		start = today
	}
	r, err := s.issueSubscriptionCreate(c, merchant, newSubscription{plan: *plan, customer: cu, start: start,
		reference: reference, redirect: redirect, clockID: clockID})
	if err != nil {
		return err
	}
	return s.subscriptionReply(c, r, http.StatusCreated)
}

// newSubscription is a PENDING subscription to create, already checked.
type newSubscription struct {
	plan                                storage.Plan
	customer                            storage.Customer
	start, reference, redirect, clockID string
}

// issueSubscriptionCreate issues the create command: the one path by which the
// secret-key API and the public plan subscribe page (subscribe.go) make a
// subscription, with the principal's merchant.
func (s *Server) issueSubscriptionCreate(c echo.Context, merchant string, n newSubscription) (topics.Reply, error) {
	ctx := c.Request().Context()
	w, err := walletstore.Settlement(ctx, s.db, merchant, "KES")
	if errors.Is(err, storage.ErrNotFound) {
		return topics.Reply{}, edge.ClientError(http.StatusBadRequest, "no_settlement_wallet", "You have no KES settlement wallet to receive subscription payments.")
	}
	if err != nil {
		return topics.Reply{}, err
	}
	// The id is the subscriptions' primary key: drawn again for each draw the
	// engine finds taken.
	var r topics.Reply
	err = s.freshIDs(c, func() error {
		id := "SUB" + s.newID()
		tok, err := s.setupToken(ctx, id)
		if err != nil {
			return err
		}
		cu := n.customer
		r, err = s.issue(c, topics.CmdSubscriptionCreate, topics.SubscriptionCreate{SubscriptionID: id, CustomerID: cu.CustomerID,
			Plan: subPlan(n.plan), StartDate: n.start, Reference: n.reference, RedirectURL: n.redirect, TestClockID: n.clockID,
			SetupTokenHash: tokenHash(tok), WalletID: w.WalletID, Terms: subTerms(n.plan),
			Customer: topics.SubscriptionCustomer{Email: cu.Email, FirstName: deref(cu.FirstName), LastName: deref(cu.LastName)}})
		return takenAsError(r, err)
	})
	return r, err
}

// pathSubscription reads the merchant's subscription named by the path: another
// merchant's is 404 exactly like one that does not exist.
func (s *Server) pathSubscription(c echo.Context) (subscription.State, error) {
	st, err := subscriptionstore.Get(c.Request().Context(), s.db, edge.PrincipalOf(c).MerchantID, c.Param("subscription_id"))
	if errors.Is(err, storage.ErrNotFound) {
		return st, edge.NotFound("Subscription not found.")
	}
	return st, err
}

func (s *Server) getSubscription(c echo.Context) error {
	st, err := s.pathSubscription(c)
	if err != nil {
		return err
	}
	out, err := s.renderSubscription(c, st)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) listSubscriptions(c echo.Context) error {
	pg, err := pageOf(c)
	if err != nil {
		return err
	}
	rows, total, err := listed(c.Request().Context(), s.db, func(q sqlx.QueryerContext) ([]subscription.State, int, error) {
		return subscriptionstore.List(c.Request().Context(), q, edge.PrincipalOf(c).MerchantID, pg.size, pg.offset())
	})
	if err != nil {
		return err
	}
	out := make([]subscriptionJSON, len(rows))
	for i, st := range rows {
		if out[i], err = s.renderSubscription(c, st); err != nil {
			return err
		}
	}
	return c.JSON(http.StatusOK, pg.list(c, total, out))
}

// updateSubscription is PUT: a new plan (from the next cycle) and/or a next_date
// override (today or later).
func (s *Server) updateSubscription(c echo.Context) error {
	ctx := c.Request().Context()
	cur, err := s.pathSubscription(c)
	if err != nil {
		return err
	}
	b, err := edge.ReadBody(c)
	if err != nil {
		return err
	}
	plan, err := s.bodyPlan(ctx, cur.MerchantID, b, false)
	if err != nil {
		return err
	}
	today, err := s.today(ctx, cur.MerchantID, cur.TestClockID)
	if err != nil {
		return err
	}
	next, err := readDate(b, "next_date", today)
	if err != nil {
		return err
	}
	if plan == nil && next == "" {
		return edge.Invalid("plan_id", "Send plan_id, next_date or both.")
	}
	u := topics.SubscriptionUpdate{SubscriptionID: cur.SubscriptionID, NextDate: next, Today: today}
	if plan != nil {
		p, t := subPlan(*plan), subTerms(*plan)
		u.Plan, u.Terms = &p, &t
	}
	r, err := s.issue(c, topics.CmdSubscriptionUpdate, u)
	if err != nil {
		return err
	}
	return s.subscriptionReply(c, r, http.StatusOK)
}

func (s *Server) unsubscribe(c echo.Context) error {
	cur, err := s.pathSubscription(c)
	if err != nil {
		return err
	}
	r, err := s.issue(c, topics.CmdSubscriptionUnsubscribe, topics.SubscriptionUnsubscribe{SubscriptionID: cur.SubscriptionID})
	if err != nil {
		return err
	}
	return s.subscriptionReply(c, r, http.StatusOK)
}

type cyclePaymentJSON struct {
	Cycle     int         `json:"cycle"`
	CycleDate string      `json:"cycle_date"`
	Status    string      `json:"status"`
	Invoice   invoiceJSON `json:"invoice"`
}

// subscriptionTransactions lists each cycle's charge (approved or failed) with
// its invoice, oldest first: one page read in SQL, never the whole history.
func (s *Server) subscriptionTransactions(c echo.Context) error {
	cur, err := s.pathSubscription(c)
	if err != nil {
		return err
	}
	pg, err := pageOf(c)
	if err != nil {
		return err
	}
	pays, total, err := listed(c.Request().Context(), s.db, func(q sqlx.QueryerContext) ([]subscriptionstore.Payment, int, error) {
		return subscriptionstore.Payments(c.Request().Context(), q, cur.MerchantID, cur.SubscriptionID, pg.size, pg.offset())
	})
	if err != nil {
		return err
	}
	out := make([]cyclePaymentJSON, len(pays))
	for i, p := range pays {
		out[i] = cyclePaymentJSON{Cycle: p.Slot + 1, CycleDate: p.CycleDate, Status: p.Invoice.State,
			Invoice: renderSession(p.Invoice).Invoice}
	}
	return c.JSON(http.StatusOK, pg.list(c, total, out))
}

// setupSubscription finds the subscription a setup token opens (the token is the
// capability; no key). An unknown token is 404.
func (s *Server) setupSubscription(c echo.Context) (subscription.State, error) {
	tok := c.Param("token")
	if !setupTokenPattern.MatchString(tok) {
		return subscription.State{}, edge.NotFound("Subscription setup not found.")
	}
	st, err := subscriptionstore.BySetupToken(c.Request().Context(), s.db, tokenHash(tok))
	if errors.Is(err, storage.ErrNotFound) {
		return st, edge.NotFound("Subscription setup not found.")
	}
	return st, err
}

// setupInfo is what the hosted setup page needs (GET .../setup/{token}/).
func (s *Server) setupInfo(c echo.Context) error {
	ctx := c.Request().Context()
	st, err := s.setupSubscription(c)
	if err != nil {
		return err
	}
	m, err := storage.GetMerchant(ctx, s.db, st.MerchantID)
	if err != nil {
		return err
	}
	out := map[string]any{"subscription_id": st.SubscriptionID, "status": st.Status, "merchant_name": m.Name,
		"start_date": st.StartDate, "next_date": optional(st.NextDate), "card_number": optional(st.CardNumber),
		"card_network": optional(st.CardNetwork), "redirect_url": optional(st.RedirectURL),
		"accepts_card": st.Status == subscription.StatusPending || st.Status == subscription.StatusFailed,
		"test_mode":    s.cfg.Environment == "sandbox"}
	if p, err := storage.GetPlan(ctx, s.db, st.MerchantID, st.Plan.PlanID); err == nil {
		out["plan"] = map[string]any{"name": p.Name, "amount": p.Amount, "currency": p.Currency, "frequency": p.Frequency,
			"frequency_unit": p.FrequencyUnit, "billing_cycles": p.BillingCycles}
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, out)
}

func maskPAN(pan string) string {
	return pan[:6] + strings.Repeat("*", len(pan)-10) + pan[len(pan)-4:]
}

// setupCard takes the customer's card on the setup token (sandbox only until a
// live acquirer exists). Only a token, the network and the masked number are kept.
func (s *Server) setupCard(c echo.Context) error {
	if s.cfg.Environment != "sandbox" {
		return edge.ClientError(http.StatusBadRequest, "method_unavailable", "Card setup is not available on this server yet: no card acquirer is connected.")
	}
	st, err := s.setupSubscription(c)
	if err != nil {
		return err
	}
	if st.Status != subscription.StatusPending && st.Status != subscription.StatusFailed {
		return edge.ClientError(http.StatusBadRequest, "subscription_status", "This subscription is "+st.Status+": it takes no card.")
	}
	b, err := edge.ReadBody(c)
	if err != nil {
		return err
	}
	pan, err := readCardFields(b)
	if err != nil {
		return err
	}
	code, err := b.Str("challenge_code", false, 12, nil)
	if err != nil {
		return err
	}
	outcome := card.TestOutcome(pan)
	switch {
	case outcome == card.OutcomeDeclined:
		return &edge.Error{Status: http.StatusPaymentRequired, Type: "client_error", Code: "card_declined", Attr: "card_number",
			Detail: "The card was declined by its issuer; use another card."}
	case pan == cardChallenge && code == "":
		return &edge.Error{Status: http.StatusPaymentRequired, Type: "client_error", Code: "challenge_required", Attr: "challenge_code",
			Detail: "The card's issuer asks for a challenge step: send the code the customer received as challenge_code."}
	case pan == cardChallenge && code != SandboxChallengeCode:
		return edge.Invalid("challenge_code", "The challenge code is wrong.")
	case pan == cardDeclineCharge:
		outcome = card.OutcomeDeclined
	}
	edge.SetPrincipal(c, &edge.Principal{MerchantID: st.MerchantID, Kind: "setup"})
	after, err := replied[subscription.State](s.issue(c, topics.CmdSubscriptionActivate, topics.SubscriptionActivate{
		SubscriptionID: st.SubscriptionID, CardToken: "ctok_" + ids.Alias(24), CardNetwork: cardNetwork(pan),
		CardNumber: maskPAN(pan), CardOutcome: outcome}))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"subscription_id": after.SubscriptionID, "status": after.Status,
		"card_number": after.CardNumber, "card_network": after.CardNetwork, "next_date": optional(after.NextDate),
		"redirect_url": optional(after.RedirectURL)})
}
