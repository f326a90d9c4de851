package api_test

import (
	"net/url"
	"strings"
	"testing"
)

type subBrowserScenario struct {
	Name       string            `json:"name"`
	Path       string            `json:"path"`
	Card       string            `json:"card"`
	Challenge  string            `json:"challenge,omitempty"`
	Keyboard   bool              `json:"keyboard,omitempty"`
	Redirect   bool              `json:"redirect,omitempty"`
	Subscriber map[string]string `json:"subscriber,omitempty"` // fills the plan's subscribe page first
}

type subBrowserResult struct {
	Requests         []string `json:"requests"`
	Console          []string `json:"console"`
	Refusals         []int    `json:"refusals"` // 4xx answers the browser logged
	Final            string   `json:"final"`
	FinalText        string   `json:"finalText"`
	Focused          string   `json:"focused"`
	Status           string   `json:"status"`
	Error            *string  `json:"error"`
	Lang             string   `json:"lang"`
	MerchantShown    string   `json:"merchantShown"`
	HeadingShown     string   `json:"headingShown"`
	TermsShown       string   `json:"termsShown"`
	PlanHeading      string   `json:"planHeading"`
	PlanTerms        string   `json:"planTerms"`
	SetupPath        string   `json:"setupPath"`
	ChallengeFocused string   `json:"challengeFocused"`
	ChallengeStatus  string   `json:"challengeStatus"`
	ChallengeHint    string   `json:"challengeHint"`
	RetryFocused     string   `json:"retryFocused"`
	RedirectedTo     string   `json:"redirectedTo"`
}

// Customers on the subscription pages in the real browser (browsertest/
// subscription.js, one chromium launch): a card saved on a setup page makes the
// subscription ACTIVE and Continue goes to the redirect_url; a card that asks for
// the issuer's challenge completes with the code; a declined card shows the
// failure screen and leaves the subscription PENDING; a new customer subscribes
// from the plan's page with the keyboard alone, through to ACTIVE. Judged through
// the secret-key API. No page asks anything of another host or logs an error (the
// endpoint's 402 answers, which chromium logs, are checked to be exactly those).
func TestSubscriptionPagesInBrowser(t *testing.T) {
	t.Parallel()
	dir := browserDir(t)
	b := setup(t)
	// The plan's redirect_url is paysvc's own health check, so following it stays
	// on the one host the pages may talk to.
	f := newSubFixture(t, b, map[string]any{"name": "GymMonthly", "amount": "2500", "currency": "KES", "frequency": 1,
		"frequency_unit": "M", "billing_cycles": 12, "redirect_url": b.env.BaseURL + "/healthz?from=gym"})
	subs := map[string]map[string]any{}
	for _, n := range []string{"sub-card", "sub-challenge", "sub-declined"} {
		subs[n] = f.create(t, nil)
	}
	page := func(n string) string { return pagePath(t, subs[n]["setup_url"], "/subscriptions/setup/") }
	scenarios := []subBrowserScenario{
		{Name: "sub-card", Path: page("sub-card"), Card: "4242 4242 4242 4242", Redirect: true},
		{Name: "sub-challenge", Path: page("sub-challenge"), Card: "4000 0000 0000 3220", Challenge: "123456"},
		{Name: "sub-declined", Path: page("sub-declined"), Card: "4000000000000002"},
		{Name: "sub-plan-keyboard", Path: "/subscribe/" + f.plan + "/", Card: "4242424242424242", Keyboard: true,
			Subscriber: map[string]string{"email": "achieng@example.com", "first_name": "Achieng", "last_name": "Odhiambo",
				"country": "KE"}},
	}
	var res map[string]subBrowserResult
	runBrowserScript(t, dir, "subscription.js", b.env.BaseURL, scenarios, &res)
	for _, s := range scenarios {
		if r := res[s.Name]; r.Error != nil {
			t.Errorf("%s: the customer got stuck: %s (screenshot in .data/screenshots)", s.Name, *r.Error)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	id := func(n string) string { return subs[n]["subscription_id"].(string) }

	t.Run("CardSetupActivatesAndContinues", func(t *testing.T) {
		r := res["sub-card"]
		if r.Lang != "en" || r.MerchantShown != "Acme" || r.HeadingShown != "Set up your subscription" ||
			!strings.Contains(r.TermsShown, "GymMonthly") || !strings.Contains(r.TermsShown, "KES 2500.00 every month") ||
			!strings.Contains(r.TermsShown, "12 payments") || !strings.Contains(r.TermsShown, "31 January 2025") {
			t.Errorf("page shows lang %q, merchant %q, heading %q, terms %q", r.Lang, r.MerchantShown, r.HeadingShown, r.TermsShown)
		}
		if r.Final != "done" || !strings.Contains(r.FinalText, "Subscription active") || !strings.Contains(r.FinalText, "424242******4242") ||
			!strings.Contains(r.FinalText, "Next charge: 31 January 2025") || r.Focused != "done-title" ||
			!strings.Contains(r.Status, "Subscription active") {
			t.Fatalf("final %s %q, focus %q, status %q", r.Final, r.FinalText, r.Focused, r.Status)
		}
		u, err := url.Parse(r.RedirectedTo)
		if err != nil || u.Path != "/healthz" || u.Query().Get("from") != "gym" || u.Query().Get("subscription_id") != id("sub-card") {
			t.Errorf("Continue went to %q, want /healthz?from=gym with the subscription id", r.RedirectedTo)
		}
		if s := f.sub(t, id("sub-card")); s["status"] != "ACTIVE" || s["card_number"] != "424242******4242" || s["card_network"] != "VISA" {
			t.Fatalf("subscription after setup: %v", s)
		}
	})

	t.Run("ChallengeStepCompletes", func(t *testing.T) {
		r := res["sub-challenge"]
		if r.ChallengeFocused != "challenge" || !strings.Contains(r.ChallengeStatus, "verify") ||
			!strings.Contains(r.ChallengeHint, "123456") {
			t.Errorf("challenge step: focus %q, status %q, hint %q", r.ChallengeFocused, r.ChallengeStatus, r.ChallengeHint)
		}
		if r.Final != "done" || !strings.Contains(r.FinalText, "400000******3220") {
			t.Fatalf("final %s %q", r.Final, r.FinalText)
		}
		if s := f.sub(t, id("sub-challenge")); s["status"] != "ACTIVE" || s["card_number"] != "400000******3220" {
			t.Fatalf("subscription after the challenge: %v", s)
		}
	})

	t.Run("DeclinedCardShowsFailureAndStaysPending", func(t *testing.T) {
		r := res["sub-declined"]
		if r.Final != "failed" || !strings.Contains(r.FinalText, "Card declined") || !strings.Contains(r.FinalText, "declined by its issuer") ||
			!strings.Contains(r.FinalText, "Try again") || r.Focused != "failed-title" || !strings.Contains(r.Status, "declined") {
			t.Fatalf("final %s %q, focus %q, status %q", r.Final, r.FinalText, r.Focused, r.Status)
		}
		if r.RetryFocused != "card-number" {
			t.Errorf("Try again should focus the card number, focus on %q", r.RetryFocused)
		}
		if s := f.sub(t, id("sub-declined")); s["status"] != "PENDING" || s["card_number"] != nil || s["setup_url"] == nil {
			t.Fatalf("subscription after a declined card: %v", s)
		}
	})

	t.Run("NewCustomerSubscribesFromThePlanPage", func(t *testing.T) {
		r := res["sub-plan-keyboard"]
		if r.PlanHeading != "Subscribe to GymMonthly" || !strings.Contains(r.PlanTerms, "KES 2500.00 every month") {
			t.Errorf("plan page: heading %q, terms %q", r.PlanHeading, r.PlanTerms)
		}
		if r.Final != "done" || !strings.Contains(r.FinalText, "Subscription active") {
			t.Fatalf("final %s %q", r.Final, r.FinalText)
		}
		var l struct {
			Results []map[string]any `json:"results"`
		}
		b.get("/api/v1/subscriptions/subscriptions/?page_size=100").JSON(t, &l)
		var found map[string]any
		for _, s := range l.Results {
			if cu, _ := s["customer"].(map[string]any); cu != nil && cu["email"] == "achieng@example.com" {
				if found != nil {
					t.Fatalf("two subscriptions for one subscribe: %v and %v", found, s)
				}
				found = s
			}
		}
		if found == nil {
			t.Fatalf("no subscription for the new customer among %d", len(l.Results))
		}
		cu := found["customer"].(map[string]any)
		if found["status"] != "ACTIVE" || found["plan"].(map[string]any)["plan_id"] != f.plan || cu["first_name"] != "Achieng" ||
			cu["last_name"] != "Odhiambo" || cu["country"] != "KE" || found["card_number"] != "424242******4242" {
			t.Fatalf("the new customer's subscription: %v", found)
		}
		if want := "/subscriptions/setup/"; !strings.HasPrefix(r.SetupPath, want) {
			t.Errorf("subscribe page went to %q", r.SetupPath)
		}
	})

	t.Run("NoRequestToAnotherHostNoConsoleError", func(t *testing.T) {
		own, _ := url.Parse(b.env.BaseURL)
		for _, s := range scenarios {
			r := res[s.Name]
			for _, raw := range r.Requests {
				if u, err := url.Parse(raw); err != nil || u.Scheme != own.Scheme || u.Host != own.Host {
					t.Errorf("%s: the page requested %q, not paysvc (%s)", s.Name, raw, own.Host)
				}
			}
			if len(r.Console) > 0 {
				t.Errorf("%s: console errors: %q", s.Name, r.Console)
			}
			// The only refusals: the challenge request and the declined card (402).
			want := 0
			if s.Challenge != "" || s.Name == "sub-declined" {
				want = 1
			}
			if len(r.Refusals) != want || (want == 1 && r.Refusals[0] != 402) {
				t.Errorf("%s: refused requests %v, want %d answer(s) 402", s.Name, r.Refusals, want)
			}
		}
	})
}
