package api_test

// The hosted checkout page in a real browser: Debian's chromium, driven by
// browsertest/checkout.js (playwright-core), against a real paysvc. The customer
// pays from the page; the outcome is judged through the API, as a merchant sees it.
// Screenshots land in .data/screenshots/ (see docs/img/checkout.png).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"paysvc/actors/values/money"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// browserTimeout only guards against a hung browser: a script runs in seconds
// on a quiet machine, but chromium with axe-core on a 2-core host loaded by the
// rest of make test has taken over 90 s (TestCustomerErrorPagesInBrowser).
const browserTimeout = 4 * time.Minute

type browserScenario struct {
	Name     string `json:"name"`
	Kind     string `json:"kind"` // stk or keyboard (browsertest/checkout.js)
	Checkout string `json:"checkout"`
	Phone    string `json:"phone"`
	Amount   string `json:"amount,omitempty"`
	Expect   string `json:"expect,omitempty"` // PROCESSING: the live stage must be seen
	Retry    bool   `json:"retry,omitempty"`
	Card     string `json:"card,omitempty"`
	Redirect bool   `json:"redirect,omitempty"` // follow the success screen's Continue link
	Path     string `json:"path,omitempty"`     // the page to open; default /checkout/{Checkout}/
}

type browserResult struct {
	Seen          []string `json:"seen"`
	Requests      []string `json:"requests"`
	Console       []string `json:"console"`
	Invoice       string   `json:"invoice"`
	Final         string   `json:"final"`
	FinalText     string   `json:"finalText"`
	Focused       string   `json:"focused"`
	Status        string   `json:"status"`
	RetryFocused  string   `json:"retryFocused"`
	Error         *string  `json:"error"`
	Lang          string   `json:"lang"`
	MerchantShown string   `json:"merchantShown"`
	HeadingShown  string   `json:"headingShown"`
	PhoneHidden   bool     `json:"phoneHidden"`
	RedirectedTo  string   `json:"redirectedTo"`
}

func TestHostedCheckoutInBrowser(t *testing.T) {
	t.Parallel()
	dir := browserDir(t)
	// The simulated customer answers after 0.2 s and M-Pesa completes 1.5 s later,
	// so the page's once-a-second poll sees the prompt accepted (PROCESSING) live.
	env := servicetest.Start(t, func(c *service.Config) {
		c.SimAcceptDelay, c.SimFinalDelay = 200*time.Millisecond, 1500*time.Millisecond
	})
	b := newBundle(t, env, "Mama Mboga Grocers")
	checkout := func(body map[string]any) string {
		t.Helper()
		r := env.Do("POST", "/api/v1/checkout/", body, "X-SERVICE-PUBLIC-API-KEY", b.public)
		if r.Status != 200 {
			t.Fatalf("create checkout: %d %s", r.Status, r.Body)
		}
		return r.Map(t)["id"].(string)
	}
	openPayRequest := func() string {
		t.Helper()
		r := b.post("/api/v1/payment/collection/pay-requests/", map[string]any{"first_name": "Wanjiru", "last_name": "Kamau",
			"email": "wanjiru@example.com", "currency": "KES", "reason": "Invoice 12"})
		if r.Status != 200 {
			t.Fatalf("create pay request: %d %s", r.Status, r.Body)
		}
		return r.Map(t)["detail"].(map[string]any)["checkout"].(map[string]any)["id"].(string)
	}
	scenarios := []browserScenario{
		{Name: "checkout-stk-success", Kind: "stk", Checkout: checkout(map[string]any{"amount": 250, "currency": "KES", "api_ref": "order-77"}),
			Phone: "0708 374 149", Expect: "PROCESSING"},
		{Name: "checkout-stk-failed", Kind: "stk", Checkout: checkout(map[string]any{"amount": 120, "currency": "KES"}),
			Phone: "254712340003", Retry: true},
		{Name: "checkout-card", Kind: "card", Checkout: checkout(map[string]any{"amount": 40, "currency": "KES"}),
			Card: "4242 4242 4242 4242"},
		// The merchant's redirect_url is paysvc's own health check, so that following
		// it stays on the one host the page may talk to.
		{Name: "checkout-redirect", Kind: "stk", Checkout: checkout(map[string]any{"amount": 60, "currency": "KES",
			"redirect_url": env.BaseURL + "/healthz?order=9"}), Phone: "254708374149", Redirect: true},
		// A pay request without an amount: its checkout asks the customer for one.
		{Name: "checkout-keyboard", Kind: "keyboard", Checkout: openPayRequest(), Phone: "254722000123", Amount: "150"},
	}
	res := runBrowser(t, dir, env.BaseURL, scenarios)
	for _, s := range scenarios {
		if r := res[s.Name]; r.Error != nil {
			t.Errorf("%s: the customer got stuck: %s (seen %q, screenshot in .data/screenshots)", s.Name, *r.Error, r.Seen)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	var paid []string // the net amounts of the completed invoices

	t.Run("STKPaysAndShowsLiveStatusThenSuccess", func(t *testing.T) {
		r := res["checkout-stk-success"]
		if r.Lang != "en" || r.MerchantShown != "Mama Mboga Grocers" || r.HeadingShown != "Pay KES 250.00" {
			t.Errorf("page shows lang %q, merchant %q, heading %q", r.Lang, r.MerchantShown, r.HeadingShown)
		}
		if len(r.Seen) != 2 || !strings.Contains(r.Seen[0], "Check your phone") || !strings.Contains(r.Seen[0], "254708374149") ||
			!strings.Contains(r.Seen[1], "PIN received") {
			t.Errorf("live status: want the prompt then the accepted PIN, saw %q", r.Seen)
		}
		if r.Final != "done" || !strings.Contains(r.FinalText, "Payment received") || !strings.Contains(r.FinalText, "KES 250.00") ||
			!strings.Contains(r.FinalText, "M-Pesa reference: SIM") {
			t.Fatalf("final screen %s: %q", r.Final, r.FinalText)
		}
		if r.Focused != "done-title" || !strings.Contains(r.Status, "Payment received") {
			t.Errorf("success not announced: focus on %q, status %q", r.Focused, r.Status)
		}
		inv := b.waitInvoice(t, r.Invoice)
		if inv["state"] != "COMPLETE" || inv["value"] != "250.00" || inv["api_ref"] != "order-77" || inv["account"] != "254708374149" {
			t.Fatalf("invoice seen by the merchant: %v", inv)
		}
		// The page holds only the signature: it shows the receipt masked, as the
		// payer can match it with their SMS (docs/security.md, "Payer data by principal").
		receipt, _ := inv["mpesa_reference"].(string)
		if receipt == "" || strings.Contains(r.FinalText, receipt) ||
			!strings.Contains(r.FinalText, "M-Pesa reference: "+payerMask(receipt)) {
			t.Errorf("final screen should show the receipt %s masked: %q", receipt, r.FinalText)
		}
		paid = append(paid, inv["net_amount"].(string))
	})

	t.Run("FailingNumberShowsReasonAndRetry", func(t *testing.T) {
		r := res["checkout-stk-failed"]
		if r.Final != "failed" || !strings.Contains(r.FinalText, "Payment failed") ||
			!strings.Contains(r.FinalText, "The balance is insufficient for the transaction.") ||
			!strings.Contains(r.FinalText, "Try again") {
			t.Fatalf("final screen %s: %q", r.Final, r.FinalText)
		}
		if r.Focused != "failed-title" || !strings.Contains(r.Status, "insufficient") {
			t.Errorf("failure not announced: focus on %q, status %q", r.Focused, r.Status)
		}
		if r.RetryFocused != "phone" {
			t.Errorf("Try again should bring the form back with focus on the phone field, focus on %q", r.RetryFocused)
		}
		if inv := b.waitInvoice(t, r.Invoice); inv["state"] != "FAILED" {
			t.Fatalf("invoice: %v", inv)
		}
	})

	t.Run("KeyboardOnly", func(t *testing.T) {
		r := res["checkout-keyboard"]
		if r.HeadingShown != "Pay in KES" || r.Final != "done" || !strings.Contains(r.FinalText, "KES 150.00") {
			t.Fatalf("keyboard payment: heading %q, final %s %q", r.HeadingShown, r.Final, r.FinalText)
		}
		inv := b.waitInvoice(t, r.Invoice)
		if inv["state"] != "COMPLETE" || inv["value"] != "150.00" {
			t.Fatalf("invoice: %v", inv)
		}
		paid = append(paid, inv["net_amount"].(string))
	})

	t.Run("CardPays", func(t *testing.T) {
		r := res["checkout-card"]
		if !r.PhoneHidden || r.Final != "done" || !strings.Contains(r.FinalText, "KES 40.00") {
			t.Fatalf("card payment: phone hidden %v, final %s %q", r.PhoneHidden, r.Final, r.FinalText)
		}
		inv := b.waitInvoice(t, r.Invoice)
		if inv["state"] != "COMPLETE" || inv["provider"] != "CARD" || inv["value"] != "40.00" {
			t.Fatalf("invoice: %v", inv)
		}
		paid = append(paid, inv["net_amount"].(string))
	})

	t.Run("SuccessContinuesToTheRedirectURL", func(t *testing.T) {
		r := res["checkout-redirect"]
		if r.Final != "done" {
			t.Fatalf("final screen %s: %q", r.Final, r.FinalText)
		}
		u, err := url.Parse(r.RedirectedTo)
		if err != nil || u.Path != "/healthz" || u.Query().Get("order") != "9" || u.Query().Get("checkout_id") != r.checkoutOf(scenarios, "checkout-redirect") ||
			u.Query().Get("tracking_id") != r.Invoice {
			t.Fatalf("redirected to %q, want /healthz?order=9 with the checkout and invoice (%s)", r.RedirectedTo, r.Invoice)
		}
		paid = append(paid, b.waitInvoice(t, r.Invoice)["net_amount"].(string))
	})

	// The settlement wallet's current balance is exactly the completed payments' net
	// amounts (card funds count there at once, available later): the failed payment
	// credited nothing.
	t.Run("WalletCreditedWithTheCompletedPaymentsOnly", func(t *testing.T) {
		if len(paid) != 4 {
			t.Fatalf("want four completed payments, have %v", paid)
		}
		want := money.MustParse("0")
		for _, p := range paid {
			want = want.Add(money.MustParse(p))
		}
		if cur, _ := b.balance(t, b.settlement); cur != want.String() {
			t.Errorf("settlement wallet holds %s, want the sum of %v = %s", cur, paid, want)
		}
	})

	t.Run("NoRequestToAnotherHost", func(t *testing.T) {
		own, err := url.Parse(env.BaseURL)
		if err != nil {
			t.Fatal(err)
		}
		var assets int
		for _, s := range scenarios {
			r := res[s.Name]
			for _, raw := range r.Requests {
				u, err := url.Parse(raw)
				if err != nil || u.Scheme != own.Scheme || u.Host != own.Host {
					t.Errorf("%s: the page requested %q, not paysvc (%s)", s.Name, raw, own.Host)
				}
				if strings.HasPrefix(u.Path, "/static/") {
					assets++
				}
			}
			// A blocked resource or script error shows in the console: the CSP must
			// not break the page.
			if len(r.Console) > 0 {
				t.Errorf("%s: console errors: %q", s.Name, r.Console)
			}
		}
		if assets < 2*len(scenarios) {
			t.Errorf("the pages loaded %d static files from paysvc, want the stylesheet and script for each", assets)
		}
	})
}

// browserDir returns the browser harness directory, failing (never skipping) when
// node, chromium or playwright-core is missing: `make test` installs them
// (`make browser sdk`), so a missing one is a broken setup.
func browserDir(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not on PATH (%v): the browser tests need it", err)
	}
	if _, err := os.Stat(chromiumPath()); err != nil {
		t.Fatalf("chromium is not installed (%v): run `make browser`", err)
	}
	dir, err := filepath.Abs("browsertest")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core", "package.json")); err != nil {
		t.Fatalf("playwright-core is not installed in %s (%v): run `make sdk`", dir, err)
	}
	return dir
}

func chromiumPath() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

// runBrowser runs browsertest/checkout.js once for all scenarios (one browser
// launch) and returns its results by scenario name.
func runBrowser(t *testing.T, dir, baseURL string, scenarios []browserScenario) map[string]browserResult {
	t.Helper()
	var res map[string]browserResult
	runBrowserScript(t, dir, "checkout.js", baseURL, scenarios, &res)
	return res
}

// runBrowserScript runs one browsertest script (one browser launch for all its
// scenarios) and decodes the JSON it prints into res.
func runBrowserScript(t *testing.T, dir, script, baseURL string, scenarios, res any) {
	t.Helper()
	shots, err := filepath.Abs(filepath.Join("..", ".data", "screenshots"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	list, err := json.Marshal(scenarios)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), browserTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PAYSVC_BASE_URL="+baseURL, "PAYSVC_SCENARIOS="+string(list),
		"PAYSVC_SCREENSHOTS="+shots, "CHROMIUM="+chromiumPath())
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s did not finish within %s\nstderr:\n%s", script, browserTimeout, &stderr)
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %s: %v\nstderr:\n%s", script, err, &stderr)
	}
	if err != nil {
		t.Fatalf("%s failed (%v): chromium could not start or the script crashed\nstderr:\n%s", script, err, &stderr)
	}
	if err := json.Unmarshal(stdout.Bytes(), res); err != nil {
		t.Fatalf("%s printed no JSON: %v\nstdout:\n%s\nstderr:\n%s", script, err, &stdout, &stderr)
	}
	t.Logf("browser results (screenshots in %s):\n%s", shots, &stdout)
}

// checkoutOf is the checkout id of the named scenario.
func (browserResult) checkoutOf(scenarios []browserScenario, name string) string {
	for _, s := range scenarios {
		if s.Name == name {
			return s.Checkout
		}
	}
	return ""
}
