package api_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"paysvc/actors/values/money"
	"paysvc/cmd/paysvc/admin"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage"
)

// otherEnvPlan stores a merchant of the other environment with one plan in env's
// database and returns the plan's id.
func otherEnvPlan(t *testing.T, env *servicetest.Env, environment string) string {
	t.Helper()
	ctx := context.Background()
	m, err := admin.CreateMerchant(ctx, env.Schema.DB, "Other "+environment, environment)
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := storage.UpsertPlan(ctx, env.Schema.DB, storage.Plan{PlanID: "LIVEPLAN0001", MerchantID: m.MerchantID, Name: "Live",
		Amount: money.MustParse("100"), Currency: "KES", Frequency: 1, FrequencyUnit: "M", BillingCycles: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p.PlanID
}

// pagePath is the path of a page address the API answered (setup_url, plan_url).
func pagePath(t *testing.T, raw any, prefix string) string {
	t.Helper()
	u, _ := raw.(string)
	i := strings.Index(u, prefix)
	if i < 0 {
		t.Fatalf("no %s address in %q", prefix, u)
	}
	return u[i:]
}

// checkPageSurface asserts what every hosted page must hold: the security
// headers, no inline code, nothing from another host.
func checkPageSurface(t *testing.T, what string, r servicetest.Response) string {
	t.Helper()
	page := string(r.Body)
	if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("%s: %d %s %s", what, r.Status, r.Header.Get("Content-Type"), page)
	}
	csp := r.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'",
		"require-trusted-types-for 'script'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("%s: CSP %q lacks %q", what, csp, want)
		}
	}
	for h, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
		"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"} {
		if got := r.Header.Get(h); got != want {
			t.Errorf("%s: %s = %q, want %q", what, h, got, want)
		}
	}
	if m := regexp.MustCompile(`<script(?:\s[^>]*)?>[^<]+</script>|<script>|\sstyle=|<style|\son[a-z]+=`).FindString(page); m != "" {
		t.Errorf("%s: inline code the CSP would block: %q", what, m)
	}
	if m := regexp.MustCompile(`(?:src|href)="(?:https?:)?//[^"]*"`).FindString(page); m != "" && !strings.Contains(m, "shop.example.com") {
		t.Errorf("%s: refers to another host: %s", what, m)
	}
	return page
}

// The setup page (a subscription's setup_url) and the plan subscribe page (a
// plan's plan_url): served with the hosted pages' headers, showing the merchant
// (escaped) and the plan's terms; the setup page shows a status screen and no form
// once the subscription no longer takes a card; unknown addresses are 404.
func TestSubscriptionPages(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, nil)
	b := newBundle(t, env, `Gym <b>Fit</b> & Co`)
	f := newSubFixture(t, b, nil)
	sub := f.create(t, nil)
	setupPage := pagePath(t, sub["setup_url"], "/subscriptions/setup/")
	token := strings.TrimSuffix(strings.TrimPrefix(setupPage, "/subscriptions/setup/"), "/")

	t.Run("SetupPageShowsPlanAndForm", func(t *testing.T) {
		page := checkPageSurface(t, "setup page", env.Do("GET", setupPage, nil))
		for _, want := range []string{"Gym &lt;b&gt;Fit&lt;/b&gt; &amp; Co", "Set up your subscription", ">Monthly<",
			"KES 1000.00</span> every month", "12 payments", "31 January 2025", `data-setup="` + token + `"`,
			`for="card-number"`, `for="challenge"`, "In test mode the code is 123456", `data-redirect="https://shop.example.com/done"`} {
			if !strings.Contains(page, want) {
				t.Errorf("setup page lacks %q:\n%s", want, page)
			}
		}
		if strings.Contains(page, "<b>Fit") {
			t.Error("merchant name not escaped")
		}
	})

	t.Run("PlanPageShowsTermsAndForm", func(t *testing.T) {
		plan := b.get("/api/v1/subscriptions/plans/" + f.plan + "/").Map(t)
		path := pagePath(t, plan["plan_url"], "/subscribe/")
		page := checkPageSurface(t, "plan page", env.Do("GET", path, nil))
		for _, want := range []string{"Subscribe to Monthly", "KES 1000.00</span> every month", "12 payments", `data-plan="` + f.plan + `"`,
			`for="email"`, `for="first-name"`, `for="last-name"`, `for="country"`, `for="zipcode"`} {
			if !strings.Contains(page, want) {
				t.Errorf("plan page lacks %q:\n%s", want, page)
			}
		}
		// Opening the page wrote nothing.
		if l := b.get("/api/v1/subscriptions/subscriptions/").Map(t); l["count"] != 1.0 {
			t.Fatalf("opening the plan page created a subscription: %v", l)
		}
	})

	t.Run("StatusScreensWithoutForm", func(t *testing.T) {
		if r := setupCard(f, setupPath(t, sub), "4242424242424242", nil); r.Status != 200 {
			t.Fatalf("setup: %d %s", r.Status, r.Body)
		}
		page := checkPageSurface(t, "active", env.Do("GET", setupPage, nil))
		if !strings.Contains(page, "Subscription active") || !strings.Contains(page, "424242******4242") ||
			strings.Contains(page, "<form") || !strings.Contains(page, `id="continue"`) {
			t.Errorf("active subscription's setup page:\n%s", page)
		}
		if r := b.post("/api/v1/subscriptions/subscriptions/"+sub["subscription_id"].(string)+"/unsubscribe/", nil); r.Status != 200 {
			t.Fatalf("unsubscribe: %d %s", r.Status, r.Body)
		}
		page = checkPageSurface(t, "canceled", env.Do("GET", setupPage, nil))
		if !strings.Contains(page, "Subscription canceled") || strings.Contains(page, "<form") || strings.Contains(page, `id="continue"`) {
			t.Errorf("canceled subscription's setup page:\n%s", page)
		}
	})

	t.Run("UnknownAddressesAre404", func(t *testing.T) {
		for _, p := range []string{"/subscriptions/setup/" + strings.Repeat("A", 43) + "/", "/subscriptions/setup/short/",
			"/subscribe/NOPLAN123456/", "/subscribe/bad%20id/", "/subscribe/" + strings.Repeat("a", 41) + "/"} {
			if r := env.Do("GET", p, nil); r.Status != 404 {
				t.Errorf("GET %s: %d %s", p, r.Status, r.Body)
			}
			if strings.HasPrefix(p, "/subscribe/") {
				if r := env.Do("POST", p, map[string]any{"email": "a@example.com", "first_name": "A", "last_name": "B"}); r.Status != 404 {
					t.Errorf("POST %s: %d %s", p, r.Status, r.Body)
				}
			}
		}
	})
}

// The public subscribe endpoint: no credential; every bad field is a 400 naming it
// with nothing written; a new customer gets a record and a PENDING subscription
// made by the API's own command; an existing customer's record is used as stored,
// never rewritten; a plan is subscribed to only in its own merchant's book.
func TestPlanSubscribeEndpoint(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, nil)
	b := newBundle(t, env, "Gym")
	other := newBundle(t, env, "Other Gym")
	f := newSubFixture(t, b, nil) // also Ann Otieno, ann@example.com
	path := "/subscribe/" + f.plan + "/"
	good := func(extra map[string]any) map[string]any {
		m := map[string]any{"email": "wanjiru@example.com", "first_name": "Wanjiru", "last_name": "Kamau"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	count := func(bb *bundle, what string) float64 {
		t.Helper()
		return bb.get("/api/v1/subscriptions/" + what + "/").Map(t)["count"].(float64)
	}

	t.Run("Validation", func(t *testing.T) {
		cases := []struct {
			attr string
			body map[string]any
		}{
			{"email", good(map[string]any{"email": nil})},
			{"email", good(map[string]any{"email": ""})},
			{"email", good(map[string]any{"email": "not-an-email"})},
			{"email", good(map[string]any{"email": strings.Repeat("a", 250) + "@x.io"})},
			{"first_name", good(map[string]any{"first_name": nil})},
			{"first_name", good(map[string]any{"first_name": "<script>"})},
			{"last_name", good(map[string]any{"last_name": ""})},
			{"last_name", good(map[string]any{"last_name": strings.Repeat("k", 46)})},
			{"country", good(map[string]any{"country": "ZZ"})},
			{"country", good(map[string]any{"country": "KEN"})},
			{"zipcode", good(map[string]any{"country": "US"})},
			{"zipcode", good(map[string]any{"country": "gb", "zipcode": ""})},
			{"zipcode", good(map[string]any{"zipcode": "12<34"})},
			{"zipcode", good(map[string]any{"zipcode": "12345678901"})},
		}
		for _, c := range cases {
			refused(t, env.Do("POST", path, c.body), c.attr, c.attr)
		}
		if r := env.Do("POST", path, []byte(`{"email":"x@example.com","first_name":"A`+"\xff"+`","last_name":"B"}`)); r.Status != 400 {
			t.Errorf("invalid UTF-8: %d %s", r.Status, r.Body)
		}
		if n := count(b, "customers"); n != 1 {
			t.Fatalf("refused requests wrote customers: %v", n)
		}
		if n := count(b, "subscriptions"); n != 0 {
			t.Fatalf("refused requests made subscriptions: %v", n)
		}
	})

	t.Run("NewCustomerGetsAPendingSubscription", func(t *testing.T) {
		r := env.Do("POST", path, good(map[string]any{"country": "us", "zipcode": "10001"}))
		if r.Status != 201 {
			t.Fatalf("subscribe: %d %s", r.Status, r.Body)
		}
		out := r.Map(t)
		sub := f.sub(t, out["subscription_id"].(string))
		cu, _ := sub["customer"].(map[string]any)
		if sub["status"] != "PENDING" || sub["setup_url"] != out["setup_url"] || out["status"] != "PENDING" ||
			sub["plan"].(map[string]any)["plan_id"] != f.plan || sub["redirect_url"] != "https://shop.example.com/done" ||
			cu["email"] != "wanjiru@example.com" || cu["first_name"] != "Wanjiru" || cu["last_name"] != "Kamau" ||
			cu["country"] != "US" || cu["zipcode"] != "10001" || sub["card_number"] != nil || sub["completed_cycles"] != 0.0 {
			t.Fatalf("subscription: %v\nanswer: %s", sub, r.Body)
		}
		// The setup_url it answers opens the setup page.
		if p := env.Do("GET", pagePath(t, out["setup_url"], "/subscriptions/setup/"), nil); p.Status != 200 ||
			!strings.Contains(string(p.Body), "Set up your subscription") {
			t.Fatalf("setup page of the new subscription: %d %s", p.Status, p.Body)
		}
	})

	t.Run("ExistingCustomerIsNotRewritten", func(t *testing.T) {
		before := b.get("/api/v1/subscriptions/customers/" + f.cust + "/").Map(t)
		r := env.Do("POST", path, map[string]any{"email": "ANN@example.com", "first_name": "Mallory", "last_name": "Evil",
			"country": "GB", "zipcode": "EC1A 1BB"})
		if r.Status != 201 {
			t.Fatalf("subscribe: %d %s", r.Status, r.Body)
		}
		after := b.get("/api/v1/subscriptions/customers/" + f.cust + "/").Map(t)
		if after["first_name"] != "Ann" || after["last_name"] != "Otieno" || after["country"] != nil || after["zipcode"] != nil ||
			after["email"] != "ann@example.com" || after["updated_at"] != before["updated_at"] {
			t.Fatalf("a public subscribe rewrote the customer: before %v, after %v", before, after)
		}
		sub := f.sub(t, r.Map(t)["subscription_id"].(string))
		if cu := sub["customer"].(map[string]any); cu["customer_id"] != f.cust || cu["first_name"] != "Ann" {
			t.Fatalf("subscription's customer: %v", cu)
		}
	})

	t.Run("OnlyThePlansOwnMerchant", func(t *testing.T) {
		// The other merchant knows the same email: its record is untouched and it
		// sees no subscription; nothing in the body can move the subscription there.
		theirs := other.post("/api/v1/subscriptions/customers/", map[string]any{"email": "juma@example.com", "first_name": "Juma",
			"last_name": "Other"}).Map(t)
		otherPlan := other.post("/api/v1/subscriptions/plans/", map[string]any{"name": "Theirs", "amount": "5", "currency": "KES",
			"frequency": 1}).Map(t)["plan_id"].(string)
		r := env.Do("POST", path, map[string]any{"email": "juma@example.com", "first_name": "Juma", "last_name": "Mine",
			"plan_id": otherPlan, "merchant_id": other.merchant, "customer_id": theirs["customer_id"]})
		if r.Status != 201 {
			t.Fatalf("subscribe: %d %s", r.Status, r.Body)
		}
		sub := f.sub(t, r.Map(t)["subscription_id"].(string))
		if sub["plan"].(map[string]any)["plan_id"] != f.plan || sub["customer"].(map[string]any)["customer_id"] == theirs["customer_id"] {
			t.Fatalf("subscription left the plan's merchant: %v", sub)
		}
		if n := count(other, "subscriptions"); n != 0 {
			t.Fatalf("the other merchant has %v subscriptions", n)
		}
		if c := other.get("/api/v1/subscriptions/customers/" + theirs["customer_id"].(string) + "/").Map(t); c["last_name"] != "Other" {
			t.Fatalf("the other merchant's customer changed: %v", c)
		}
		// A live merchant's plan does not open on this sandbox server.
		live := otherEnvPlan(t, env, "live")
		if r := env.Do("GET", "/subscribe/"+live+"/", nil); r.Status != 404 {
			t.Errorf("live plan page on the sandbox: %d", r.Status)
		}
		if r := env.Do("POST", "/subscribe/"+live+"/", good(nil)); r.Status != 404 {
			t.Errorf("live plan subscribe on the sandbox: %d %s", r.Status, r.Body)
		}
	})
}

// On a live server (no card acquirer yet) both pages say card setup is not
// available, with no form, and the public subscribe creates nothing.
func TestSubscriptionPagesLive(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) { c.Environment, c.API.Environment = "live", "live" })
	b := newBundle(t, env, "Live Gym")
	plan := b.post("/api/v1/subscriptions/plans/", goldPlan(nil)).Map(t)
	cust := b.post("/api/v1/subscriptions/customers/", map[string]any{"email": "ann@example.com", "first_name": "Ann",
		"last_name": "Otieno"}).Map(t)
	sub := b.post("/api/v1/subscriptions/subscriptions/", map[string]any{"plan_id": plan["plan_id"], "customer_id": cust["customer_id"]})
	if sub.Status != 201 {
		t.Fatalf("create subscription: %d %s", sub.Status, sub.Body)
	}
	page := checkPageSurface(t, "live setup page", env.Do("GET", pagePath(t, sub.Map(t)["setup_url"], "/subscriptions/setup/"), nil))
	if !strings.Contains(page, "Card setup is not available") || strings.Contains(page, "<form") || strings.Contains(page, "Test mode") {
		t.Errorf("live setup page:\n%s", page)
	}
	planPath := pagePath(t, plan["plan_url"], "/subscribe/")
	page = checkPageSurface(t, "live plan page", env.Do("GET", planPath, nil))
	if !strings.Contains(page, "Subscribing is not available") || strings.Contains(page, "<form") {
		t.Errorf("live plan page:\n%s", page)
	}
	r := env.Do("POST", planPath, map[string]any{"email": "new@example.com", "first_name": "New", "last_name": "One"})
	if _, code, _ := errorBody(t, r); r.Status != 400 || code != "method_unavailable" {
		t.Errorf("live subscribe: %d %s", r.Status, r.Body)
	}
	if l := b.get("/api/v1/subscriptions/customers/").Map(t); l["count"] != 1.0 {
		t.Errorf("live subscribe wrote a customer: %v", l)
	}
}
