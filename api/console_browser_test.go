package api_test

// The merchant console in a real browser: Debian's chromium driven by
// browsertest/console.js (playwright-core), with axe-core on every page, against a
// real paysvc. The merchant works through the pages; each outcome is judged through
// the API as an integration would see it. Screenshots land in .data/screenshots/
// (docs/img/console-*.png are copies of them).

import (
	"context"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"paysvc/actors/outbound/webhooks"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

type consoleBrowserResult struct {
	Steps []string `json:"steps"`
	Axe   map[string][]struct {
		ID     string   `json:"id"`
		Impact string   `json:"impact"`
		Help   string   `json:"help"`
		Nodes  []string `json:"nodes"`
	} `json:"axe"`
	Console          []string `json:"console"`
	Requests         []string `json:"requests"`
	Error            *string  `json:"error"`
	MerchantShown    string   `json:"merchantShown"`
	NewSecret        string   `json:"newSecret"`
	SecretShownAgain bool     `json:"secretShownAgain"`
	FileTotal        string   `json:"fileTotal"`
	FileCharges      string   `json:"fileCharges"`
	FileBefore       string   `json:"fileBefore"`
	FileNotice       string   `json:"fileNotice"`
	FileAfter        string   `json:"fileAfter"`
	AttemptsBefore   int      `json:"attemptsBefore"`
	AttemptsAfter    int      `json:"attemptsAfter"`
	NewestAttempt    string   `json:"newestAttempt"`
	NewestSigned     struct {
		ID        string `json:"id"`
		Timestamp string `json:"timestamp"`
		Signature string `json:"signature"`
	} `json:"newestSigned"`
	RefundInvoice      string   `json:"refundInvoice"`
	RefundNotice       string   `json:"refundNotice"`
	RefundsShown       string   `json:"refundsShown"`
	SubscriptionNotice string   `json:"subscriptionNotice"`
	SubscriptionRow    string   `json:"subscriptionRow"`
	RestrictedNav      []string `json:"restrictedNav"`
	RestrictedFileAppr int      `json:"restrictedFileApprove"`
	RestrictedKeys     int      `json:"restrictedKeys"`
	RestrictedKeysText string   `json:"restrictedKeysText"`
	RestrictedWebhooks int      `json:"restrictedWebhooks"`
	RestrictedRefunds  int      `json:"restrictedRefunds"`
	PhoneOverflow      bool     `json:"phoneOverflow"`
	SignOutNotice      string   `json:"signOutNotice"`
	CookieAfterSignOut bool     `json:"cookieAfterSignOut"`
	OldCookieLandsOn   string   `json:"oldCookieLandsOn"`
	RotatedSecret      string   `json:"rotatedSecret"`
	LinkNotice         string   `json:"linkNotice"`
	LinkQRWidth        int      `json:"linkQRWidth"`
	LinkAfter          string   `json:"linkAfter"`
	ClockCreated       string   `json:"clockCreated"`
	ClockAdvanced      string   `json:"clockAdvanced"`
	ClockID            string   `json:"clockID"`
}

func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	dir := browserDir(t)
	env := servicetest.Start(t, func(c *service.Config) {
		c.API.WebhookAllowPrivate = true
		c.Webhooks.Poll = 20 * time.Millisecond
	})
	b := newBundle(t, env, "Duka La Mama")
	b.deposit(t, b.settlement, "5000")

	// A payment file awaiting approval: two payouts of 100.
	file := preview(t, b)

	// A webhook event, delivered once.
	recv := newReceiver(t, 200)
	hook := b.post("/api/v1/webhooks/", map[string]any{"endpoint": recv.srv.URL + "/hook", "challenge": "duka-secret",
		"wallet_transfer_event": true})
	if hook.Status != 201 {
		t.Fatalf("webhook: %d %s", hook.Status, hook.Body)
	}
	signingKey, err := webhooks.ParseSecret(hook.Map(t)["signing_secret"].(string))
	if err != nil {
		t.Fatal(err)
	}
	w := b.wallet(t, "KES", "Float")
	if r := b.transfer(b.settlement, w, "25.00"); r.Status != 200 {
		t.Fatalf("transfer: %d %s", r.Status, r.Body)
	}
	var event string
	waitUntil(t, "the transfer event delivered", func() bool {
		var l struct{ Results []map[string]any }
		b.get("/api/v1/webhooks/events/?status=DELIVERED").JSON(t, &l)
		if len(l.Results) > 0 {
			event = l.Results[0]["id"].(string)
		}
		return event != ""
	})
	delivered := len(recv.requests())

	// A completed collection to refund.
	r := b.post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": "254708374149", "amount": "300",
		"api_ref": "order-300"})
	if r.Status != 200 {
		t.Fatalf("stk push: %d %s", r.Status, r.Body)
	}
	invoice := r.Map(t)["invoice"].(map[string]any)["invoice_id"].(string)
	if inv := b.waitInvoice(t, invoice); inv["state"] != "COMPLETE" {
		t.Fatalf("collection: %v", inv)
	}

	// A subscription to cancel.
	plan := b.post("/api/v1/subscriptions/plans/", goldPlan(nil)).Map(t)
	cust := b.post("/api/v1/subscriptions/customers/", alice(nil)).Map(t)
	sub := b.post("/api/v1/subscriptions/subscriptions/", map[string]any{"plan_id": plan["plan_id"], "customer_id": cust["customer_id"]})
	if sub.Status != 201 {
		t.Fatalf("subscription: %d %s", sub.Status, sub.Body)
	}
	subID := sub.Map(t)["subscription_id"].(string)

	scenario := map[string]any{"key": b.secret, "file": file, "event": event, "phone": "0708 374 149", "refund": "40",
		"subscription": subID, "wallet": b.settlement, "grant": []string{"view_wallets", "view_files"}}
	var res consoleBrowserResult
	runBrowserScript(t, dir, "console.js", env.BaseURL, scenario, &res)
	if res.Error != nil {
		t.Fatalf("the merchant got stuck after %q: %s (screenshots in .data/screenshots)", res.Steps, *res.Error)
	}

	t.Run("SignIn", func(t *testing.T) {
		if res.MerchantShown != "Duka La Mama" {
			t.Errorf("merchant shown: %q", res.MerchantShown)
		}
	})

	t.Run("RestrictedKeySecretShownOnce", func(t *testing.T) {
		if !regexp.MustCompile(`^ISSecretKey_test_[0-9a-f]{64}$`).MatchString(res.NewSecret) || res.SecretShownAgain {
			t.Fatalf("new key %q, shown again %v", res.NewSecret, res.SecretShownAgain)
		}
		// It is a real key with exactly the ticked permissions.
		key := servicetest.Bearer(res.NewSecret)
		if r := env.Do("GET", "/api/v1/wallets/", nil, key...); r.Status != 200 {
			t.Errorf("the new key reads wallets: %d", r.Status)
		}
		if r := env.Do("POST", "/api/v1/send-money/approve/", map[string]any{"file_id": file}, key...); r.Status != 403 {
			t.Errorf("the new key approves files: %d", r.Status)
		}
	})

	t.Run("ApprovePaymentFile", func(t *testing.T) {
		if res.FileBefore != "PREVIEW-AND-APPROVE" || res.FileTotal != "KES 200.00" || !strings.HasPrefix(res.FileCharges, "KES ") ||
			res.FileCharges == "KES 0.00" {
			t.Errorf("before approval the page showed %s, total %q, charges %q", res.FileBefore, res.FileTotal, res.FileCharges)
		}
		if !strings.Contains(res.FileNotice, "approved") || res.FileAfter != "COMPLETE" {
			t.Fatalf("after approval: notice %q, status %q", res.FileNotice, res.FileAfter)
		}
		if st := fileStatus(t, b, file); st != "COMPLETE" {
			t.Fatalf("the API says the file is %s", st)
		}
		ledgerOK(t, b)
	})

	t.Run("ReplayWebhookEvent", func(t *testing.T) {
		if res.AttemptsAfter != res.AttemptsBefore+1 || !strings.Contains(res.NewestAttempt, "replay") ||
			!strings.Contains(res.NewestAttempt, "200") {
			t.Fatalf("attempts %d -> %d, newest %q", res.AttemptsBefore, res.AttemptsAfter, res.NewestAttempt)
		}
		got := recv.requests()
		if len(got) != delivered+1 {
			t.Fatalf("the endpoint got %d requests, want %d", len(got), delivered+1)
		}
		// The page shows the headers the replay sent, and they verify against the
		// stored body with the webhook's signing secret.
		shown, sent := res.NewestSigned, got[delivered].headers
		if shown.ID != event || shown.ID != sent["webhook-id"] || shown.Timestamp != sent["webhook-timestamp"] ||
			shown.Signature != sent["webhook-signature"] {
			t.Fatalf("the page shows %+v; the endpoint got %v", shown, sent)
		}
		var body []byte
		if err := env.Schema.DB.GetContext(context.Background(), &body, `SELECT body FROM webhook_deliveries WHERE event_id = $1`,
			event); err != nil {
			t.Fatal(err)
		}
		ts, err := strconv.ParseInt(shown.Timestamp, 10, 64)
		if err != nil {
			t.Fatalf("webhook-timestamp shown: %q", shown.Timestamp)
		}
		want := webhooks.DeliveryHeaders("duka-secret", signingKey, event, time.Unix(ts, 0), body)["webhook-signature"]
		if shown.Signature != want || !strings.HasPrefix(want, "v1,") {
			t.Fatalf("the signature shown %q does not verify against the stored body (want %q)", shown.Signature, want)
		}
		// The merchant's own page shows it; the service's logs never do.
		if strings.Contains(env.Logs.String(), strings.TrimPrefix(shown.Signature, "v1,")) {
			t.Fatal("a webhook signature is in the service's logs")
		}
	})

	t.Run("RotateWebhookSecret", func(t *testing.T) {
		if !strings.HasPrefix(res.RotatedSecret, "whsec_") {
			t.Fatalf("rotated secret shown: %q", res.RotatedSecret)
		}
		// The endpoint's next delivery verifies with the new secret only if the API
		// stored it: a replay now signs with it.
		before := len(recv.requests())
		if r := b.post("/api/v1/webhooks/events/"+event+"/replay/", nil); r.Status != 200 {
			t.Fatalf("replay: %d %s", r.Status, r.Body)
		}
		got := recv.requests()
		if len(got) != before+1 {
			t.Fatalf("replay reached the endpoint %d times", len(got)-before)
		}
		key, err := webhooks.ParseSecret(res.RotatedSecret)
		if err != nil {
			t.Fatal(err)
		}
		last := got[len(got)-1]
		if !webhooks.VerifyDelivery("duka-secret", key, last.headers, last.body, time.Now(), 5*time.Minute) ||
			!strings.Contains(last.headers["webhook-signature"], "v1,") {
			t.Fatalf("the replay is not signed with the secret the console showed: %v", last.headers)
		}
	})

	t.Run("PaymentLinkCreateQRDeactivate", func(t *testing.T) {
		if !strings.Contains(res.LinkNotice, "created") || res.LinkQRWidth < 50 || !strings.Contains(res.LinkAfter, "inactive") {
			t.Fatalf("link: notice %q, QR width %d, after %q", res.LinkNotice, res.LinkQRWidth, res.LinkAfter)
		}
		var l struct{ Results []map[string]any }
		b.get("/api/v1/paymentlinks/").JSON(t, &l)
		if len(l.Results) != 1 || l.Results[0]["title"] != "Market stall" || l.Results[0]["is_active"] != false || l.Results[0]["amount"] != float64(500) {
			t.Fatalf("the API lists %v", l.Results)
		}
	})

	t.Run("TestClockCreateAdvance", func(t *testing.T) {
		if res.ClockCreated != "2026-01-01 09:00" || res.ClockAdvanced != "2026-02-01 09:00" {
			t.Fatalf("clock shown at %q then %q", res.ClockCreated, res.ClockAdvanced)
		}
		r := b.get("/api/v1/subscriptions/test_clocks/" + res.ClockID + "/")
		if r.Status != 200 || r.Map(t)["frozen_time"] != "2026-02-01T06:00:00Z" {
			t.Fatalf("the API says %d %s", r.Status, r.Body)
		}
	})

	t.Run("RefundCollection", func(t *testing.T) {
		if res.RefundInvoice != invoice || !strings.Contains(res.RefundNotice, "Refund requested") ||
			!strings.Contains(res.RefundsShown, invoice) || !strings.Contains(res.RefundsShown, "40.00") {
			t.Fatalf("refund: invoice %q, notice %q, list %q", res.RefundInvoice, res.RefundNotice, res.RefundsShown)
		}
		var l struct{ Results []map[string]any }
		b.get("/api/v1/chargebacks/").JSON(t, &l)
		if len(l.Results) != 1 || l.Results[0]["invoice"] != invoice || l.Results[0]["amount"] != "40.00" {
			t.Fatalf("the API lists %v", l.Results)
		}
	})

	t.Run("CancelSubscription", func(t *testing.T) {
		if !strings.Contains(res.SubscriptionNotice, "cancelled") || !strings.Contains(res.SubscriptionRow, "CANCELED") {
			t.Errorf("page: notice %q, row %q", res.SubscriptionNotice, res.SubscriptionRow)
		}
		r := b.get("/api/v1/subscriptions/subscriptions/" + subID + "/")
		if r.Status != 200 || r.Map(t)["status"] != "CANCELED" {
			t.Fatalf("the API says %d %s", r.Status, r.Body)
		}
	})

	t.Run("RestrictedKeySessionReachesOnlyItsPermissions", func(t *testing.T) {
		if !slices.Equal(res.RestrictedNav, []string{"Overview", "Wallets", "Payment files"}) {
			t.Errorf("navigation of a view_wallets+view_files key: %q", res.RestrictedNav)
		}
		if res.RestrictedFileAppr != 0 || res.RestrictedKeys != 403 || res.RestrictedWebhooks != 403 || res.RestrictedRefunds != 403 ||
			!strings.Contains(res.RestrictedKeysText, "unrestricted") {
			t.Errorf("restricted: approve buttons %d, keys %d (%q), webhooks %d, refunds %d", res.RestrictedFileAppr, res.RestrictedKeys,
				res.RestrictedKeysText, res.RestrictedWebhooks, res.RestrictedRefunds)
		}
	})

	t.Run("SignOutEndsTheSession", func(t *testing.T) {
		if !strings.Contains(res.SignOutNotice, "signed out") || res.CookieAfterSignOut || res.OldCookieLandsOn != "/console/sign-in" {
			t.Fatalf("sign out: notice %q, cookie kept %v, old cookie lands on %q", res.SignOutNotice, res.CookieAfterSignOut, res.OldCookieLandsOn)
		}
	})

	t.Run("AccessibleOnEveryPage", func(t *testing.T) {
		if len(res.Axe) < 18 {
			t.Errorf("axe ran on only %d pages", len(res.Axe))
		}
		for page, vs := range res.Axe {
			for _, v := range vs {
				if v.Impact == "serious" || v.Impact == "critical" {
					t.Errorf("%s: %s (%s) %s at %q", page, v.ID, v.Impact, v.Help, v.Nodes)
				}
			}
		}
		if res.PhoneOverflow {
			t.Error("the overview scrolls sideways on a phone")
		}
	})

	t.Run("NoRequestToAnotherHostAndNoConsoleErrors", func(t *testing.T) {
		own, err := url.Parse(env.BaseURL)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range res.Requests {
			u, err := url.Parse(raw)
			if err != nil || u.Host != own.Host {
				t.Errorf("the console requested %q", raw)
			}
		}
		if len(res.Console) > 0 {
			t.Errorf("console errors (a CSP refusal shows here): %q", res.Console)
		}
	})

	var left int
	if err := env.Schema.DB.GetContext(context.Background(), &left, `SELECT count(*) FROM console_sessions s JOIN api_keys k USING (key_id)
		WHERE k.key_id = $1`, b.secret[:len("ISSecretKey_test_")+12]); err != nil {
		t.Fatal(err)
	}
	t.Logf("sessions of the full key still open (the phone's, never signed out): %d", left)
}
