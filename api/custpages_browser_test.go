package api_test

import (
	"net/url"
	"strings"
	"testing"

	"paysvc/cmd/paysvc/service/servicetest"
)

type errorPageScenario struct {
	Name string            `json:"name"`
	Path string            `json:"path"`
	Post map[string]string `json:"post,omitempty"`
}

type errorPageResult struct {
	Status      int      `json:"status"`
	ContentType string   `json:"contentType"`
	Title       string   `json:"title"`
	Lang        string   `json:"lang"`
	Heading     string   `json:"heading"`
	Headings    int      `json:"headings"`
	Main        int      `json:"main"`
	Banner      int      `json:"banner"`
	Text        string   `json:"text"`
	RawJSON     bool     `json:"rawJSON"`
	Console     []string `json:"console"`
	Requests    []string `json:"requests"`
	Error       *string  `json:"error"`
	Axe         []struct {
		ID     string   `json:"id"`
		Impact string   `json:"impact"`
		Help   string   `json:"help"`
		Nodes  []string `json:"nodes"`
	} `json:"axe"`
}

// A customer's browser that opens a customer address that refuses (each route:
// checkout, payment link, subscribe, subscription setup), or posts a form to one,
// is shown a page in the real browser (browsertest/errorpages.js): the status, a
// title and one heading saying what happened, what to do, lang, the landmarks,
// no raw JSON, nothing axe-core objects to, nothing from another host, no console
// error (the CSP blocks nothing the page needs).
func TestCustomerErrorPagesInBrowser(t *testing.T) {
	t.Parallel()
	dir := browserDir(t)
	env := servicetest.Start(t, nil)
	b := newBundle(t, env, "Soko Safi")
	inactive := b.pythonCreateLink(t, map[string]any{"title": "Old stall", "amount": 100})["id"].(string)
	if r := b.pythonLink("POST", "/"+inactive+"/deactivate/", nil); r.Status != 200 {
		t.Fatalf("deactivate: %d %s", r.Status, r.Body)
	}
	plan := b.post("/api/v1/subscriptions/plans/", goldPlan(nil))
	if plan.Status != 201 {
		t.Fatalf("plan: %d %s", plan.Status, plan.Body)
	}
	planPath := pagePath(t, plan.Map(t)["plan_url"], "/subscribe/")
	scenarios := []errorPageScenario{
		{Name: "checkout-unknown", Path: "/checkout/" + "0c3f3c1e-0000-4000-8000-000000000000/"},
		{Name: "paylink-unknown", Path: "/pay/no-such-link/"},
		{Name: "paylink-inactive", Path: "/pay/" + inactive + "/"},
		{Name: "paylink-inactive-post", Path: "/pay/" + inactive + "/session/", Post: map[string]string{"x": "1"}},
		{Name: "subscribe-unknown", Path: "/subscribe/NOSUCHPLAN/"},
		{Name: "subscribe-form-post", Path: planPath, Post: map[string]string{"email": "amina@example.com", "first_name": "Amina",
			"last_name": "Otieno"}},
		{Name: "setup-unknown", Path: "/subscriptions/setup/" + strings.Repeat("Z", 43) + "/"},
	}
	want := map[string]struct {
		status  int
		heading string
		says    string
	}{
		"checkout-unknown":      {404, "Payment page not found", "Check that the address is exactly the one you were sent"},
		"paylink-unknown":       {404, "Payment link not found", "Nothing was charged."},
		"paylink-inactive":      {410, "This link is not accepting payments", "Please contact Soko Safi"},
		"paylink-inactive-post": {410, "This link is not accepting payments", "Please contact Soko Safi for another way to pay."},
		"subscribe-unknown":     {404, "Subscription not found", "Check that the address is exactly the one you were sent"},
		"subscribe-form-post":   {400, "This could not be done", "Go back to the page you came from and try again."},
		"setup-unknown":         {404, "Card setup not found", "Nothing was charged."},
	}
	var res map[string]errorPageResult
	runBrowserScript(t, dir, "errorpages.js", env.BaseURL, scenarios, &res)
	own, err := url.Parse(env.BaseURL)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range scenarios {
		r, w := res[s.Name], want[s.Name]
		if r.Error != nil {
			t.Errorf("%s: the browser got stuck: %s", s.Name, *r.Error)
			continue
		}
		if r.Status != w.status || !strings.HasPrefix(r.ContentType, "text/html") || r.RawJSON {
			t.Errorf("%s: %d %s, raw JSON %v: %q", s.Name, r.Status, r.ContentType, r.RawJSON, r.Text)
		}
		if r.Heading != w.heading || !strings.HasPrefix(r.Title, w.heading) || r.Headings != 1 || !strings.Contains(r.Text, w.says) {
			t.Errorf("%s: title %q, heading %q (%d h1), text %q; want %q saying %q", s.Name, r.Title, r.Heading, r.Headings, r.Text,
				w.heading, w.says)
		}
		if r.Lang != "en" || r.Main != 1 || r.Banner != 1 {
			t.Errorf("%s: lang %q, %d main and %d banner landmarks", s.Name, r.Lang, r.Main, r.Banner)
		}
		for _, v := range r.Axe {
			t.Errorf("%s: axe %s (%s): %s at %v", s.Name, v.ID, v.Impact, v.Help, v.Nodes)
		}
		if len(r.Console) > 0 {
			t.Errorf("%s: console errors: %q", s.Name, r.Console)
		}
		for _, raw := range r.Requests {
			if u, err := url.Parse(raw); err != nil || u.Host != own.Host {
				t.Errorf("%s: the page requested %q, not paysvc", s.Name, raw)
			}
		}
	}
}
