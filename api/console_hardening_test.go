package api_test

// The console's defences of payers' data and of its own writes (docs/security.md,
// "Console sessions"): payer data only with view_collections, a new key only with
// the signed-in key typed again and once per form, the session cookie __Host- and
// Secure behind a TLS proxy, a search cut at a character boundary, and a CSP
// without script.

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"paysvc/actors/values/ids"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// consolePages are the console's GET pages for a merchant with a wallet and an
// invoice (sandbox), the refund form opened on that invoice.
func consolePages(wallet, invoice string) []string {
	return []string{"/console", "/console/wallets", "/console/wallets/" + wallet, "/console/collections",
		"/console/collections?q=" + url.QueryEscape("0712 345 678"), "/console/payment-files", "/console/refunds",
		"/console/refunds/new?invoice=" + invoice, "/console/subscriptions", "/console/payment-links", "/console/webhooks",
		"/console/keys", "/console/mailbox", "/console/test-clocks"}
}

// A key's console shows a payer's phone and email only if the key may read
// collections: the refund form (add_refunds) names the invoice's payer only with
// view_collections too, and no other page shows them to any other permission.
// Every page of every key: no script, and a CSP that allows none.
func TestConsolePayerDataNeedsViewCollections(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, nil)
	b := newBundle(t, env, "Private Payers")
	const phone, email = "254712345678", "wanjiku.private@example.com"
	r := b.post("/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": phone, "amount": "50", "api_ref": "order-pp",
		"email": email})
	if r.Status != 200 {
		t.Fatalf("stk push: %d %s", r.Status, r.Body)
	}
	invoice := r.Map(t)["invoice"].(map[string]any)["invoice_id"].(string)
	cc := newConsoleClient(t, env.BaseURL)
	pages := consolePages(b.settlement, invoice)

	shows := func(body string) bool {
		return strings.Contains(body, phone) || strings.Contains(strings.ToLower(body), email)
	}
	scriptTag := regexp.MustCompile(`(?i)<script|\son[a-z]+=|javascript:`)
	visit := func(who, session string, check func(path string, p consoleResp)) {
		for _, path := range pages {
			p := cc.page(sandboxCookie, session, path)
			if p.Status == 200 {
				if m := scriptTag.FindString(p.Body); m != "" {
					t.Errorf("%s %s: the page has script (%q)", who, path, m)
				}
			}
			check(path, p)
		}
	}

	t.Run("RefundFormWithAddRefundsOnly", func(t *testing.T) {
		s := cc.signIn(env.Key(b.merchant, "add_refunds"), sandboxCookie, nil)
		p := cc.page(sandboxCookie, s, "/console/refunds/new?invoice="+invoice)
		if p.Status != 200 || !strings.Contains(p.Body, `id="no-collection"`) || !strings.Contains(p.Body, `value="`+invoice+`"`) {
			t.Fatalf("refund form: %d\n%s", p.Status, p.Body)
		}
		if shows(p.Body) || strings.Contains(p.Body, "order-pp") {
			t.Errorf("a key with only add_refunds reads the collection's payer:\n%s", p.Body)
		}
	})

	t.Run("RefundFormWithViewCollections", func(t *testing.T) {
		s := cc.signIn(env.Key(b.merchant, "add_refunds", "view_collections"), sandboxCookie, nil)
		p := cc.page(sandboxCookie, s, "/console/refunds/new?invoice="+invoice)
		if p.Status != 200 || !strings.Contains(p.Body, phone) || !strings.Contains(p.Body, email) || strings.Contains(p.Body, `id="no-collection"`) {
			t.Fatalf("refund form with view_collections does not show the collection: %d\n%s", p.Status, p.Body)
		}
	})

	t.Run("NoOtherPermissionShowsThePayer", func(t *testing.T) {
		for _, perm := range []string{"view_wallets", "add_wallets", "add_transfers", "add_collections", "view_files", "add_files",
			"change_files", "approve_files", "view_webhooks", "change_webhooks", "view_refunds", "add_refunds", "view_subscriptions",
			"change_subscriptions"} {
			s := cc.signIn(env.Key(b.merchant, perm), sandboxCookie, nil)
			visit(perm, s, func(path string, p consoleResp) {
				if shows(p.Body) {
					t.Errorf("a key with only %s reads the payer on %s (%d)", perm, path, p.Status)
				}
			})
		}
		// The unrestricted key sees them where collections are listed.
		s := cc.signIn(b.secret, sandboxCookie, nil)
		seen := false
		visit("unrestricted", s, func(path string, p consoleResp) {
			if p.Status != 200 {
				t.Errorf("unrestricted %s: %d", path, p.Status)
			}
			seen = seen || shows(p.Body)
		})
		if !seen {
			t.Error("the unrestricted key sees no payer anywhere: the check above proves nothing")
		}
	})

	t.Run("ConsolePagesAllowNoScript", func(t *testing.T) {
		s := cc.signIn(b.secret, sandboxCookie, nil)
		for _, path := range append(pages, "/console/sign-in", "/console/payment-files/NOSUCHFILE") {
			r, err := http.NewRequest("GET", env.BaseURL+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			r.AddCookie(&http.Cookie{Name: sandboxCookie, Value: s})
			resp, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			got := resp.Header.Get("Content-Security-Policy")
			if !strings.Contains(got, "script-src 'none'") || strings.Contains(got, "script-src 'self'") ||
				!strings.Contains(got, "default-src 'none'") || !strings.Contains(got, "frame-ancestors 'none'") {
				t.Errorf("%s (%d): CSP %q, want script-src 'none'", path, resp.StatusCode, got)
			}
		}
		// The hosted pages keep their own script.
		co := env.Do("POST", "/api/v1/checkout/", map[string]any{"amount": 10, "currency": "KES"}, "X-SERVICE-PUBLIC-API-KEY", b.public)
		page := env.Do("GET", "/checkout/"+co.Map(t)["id"].(string)+"/", nil)
		if csp := page.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("checkout page CSP %q lost its script", csp)
		}
	})
}

// The collection search takes a long term of multibyte characters and answers the
// page: the term cut to 200 bytes at a character boundary, never a 400.
func TestConsoleSearchCutsAtACharacter(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, nil)
	b := newBundle(t, env, "Search")
	cc := newConsoleClient(t, env.BaseURL)
	s := cc.signIn(b.secret, sandboxCookie, nil)
	long := strings.Repeat("€", 100) // 300 bytes; byte 200 is inside the 67th
	for q, kept := range map[string]string{long: strings.Repeat("€", 66), "Ünïcödé " + long: "Ünïcödé " + strings.Repeat("€", 62),
		strings.Repeat("a", 199) + "é": strings.Repeat("a", 199)} {
		p := cc.page(sandboxCookie, s, "/console/collections?q="+url.QueryEscape(q))
		if p.Status != 200 || !strings.Contains(p.Body, `name="q" type="search" value="`+kept+`"`) {
			t.Errorf("search %q: %d, want the page with the term %q\n%.600s", q, p.Status, kept, p.Body)
		}
	}
}

// Behind a TLS-terminating proxy (public base URL https, the request plain http)
// a sandbox console's cookies are Secure, and the session's is __Host- prefixed
// (Path=/, no Domain): a browser then never sends or accepts it over plain http.
func TestConsoleSandboxCookieBehindTLSProxy(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) { c.PublicBaseURL = "https://console.example.test" })
	b := newBundle(t, env, "Proxied")
	cc := newConsoleClient(t, env.BaseURL)
	cc.origin = strings.Replace(env.BaseURL, "http://", "https://", 1)
	const name = "__Host-console_sandbox_session"
	page := cc.do("GET", "/console/sign-in", nil, nil)
	if pre := page.Cookies["console_signin"]; pre == nil || !pre.Secure || !pre.HttpOnly {
		t.Fatalf("sign-in cookie over the proxy: %+v", pre)
	}
	s := cc.signIn(b.secret, name, nil)
	r := cc.do("POST", "/console/sign-in", url.Values{"csrf": {csrfOf(t, page.Body)}, "key": {b.secret}},
		map[string]string{"console_signin": page.Cookies["console_signin"].Value})
	ck := r.Cookies[name]
	if ck == nil || !ck.Secure || ck.Path != "/" || ck.Domain != "" || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie over the proxy: %+v (all: %v)", ck, r.Cookies)
	}
	if r.Cookies[sandboxCookie] != nil {
		t.Errorf("the unprefixed cookie is set too: %+v", r.Cookies[sandboxCookie])
	}
	if p := cc.page(name, s, "/console"); p.Status != 200 || !strings.Contains(p.Body, "Proxied") {
		t.Fatalf("the __Host- session opens the console: %d", p.Status)
	}
	if p := cc.page(sandboxCookie, s, "/console"); !signedOut(p) {
		t.Errorf("the session under the unprefixed name: %d", p.Status)
	}
}

var onceField = regexp.MustCompile(`name="once" value="([^"]+)"`)

// Making a key from the console asks for the signed-in secret key again, and its
// form's one-time token makes a second submit (a double click, a resubmitted POST)
// create nothing and say so, even when both arrive at once.
func TestConsoleKeyCreationReauthAndOnce(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, nil)
	a := newBundle(t, env, "Keys A")
	other := newBundle(t, env, "Keys B")
	cc := newConsoleClient(t, env.BaseURL)
	s := cc.signIn(a.secret, sandboxCookie, nil)
	cookie := map[string]string{sandboxCookie: s}
	keys := func() int {
		t.Helper()
		var n int
		if err := env.Schema.DB.Get(&n, `SELECT count(*) FROM api_keys WHERE merchant_id = $1`, a.merchant); err != nil {
			t.Fatal(err)
		}
		return n
	}
	form := func() (csrf, once string) {
		t.Helper()
		p := cc.page(sandboxCookie, s, "/console/keys")
		m := onceField.FindStringSubmatch(p.Body)
		if p.Status != 200 || m == nil || !strings.Contains(p.Body, `name="confirm_key" type="password"`) {
			t.Fatalf("keys page: %d, no one-time token or confirmation field\n%s", p.Status, p.Body)
		}
		return csrfOf(t, p.Body), m[1]
	}
	submit := func(csrf, once, confirm string) consoleResp {
		v := url.Values{"csrf": {csrf}, "permission": {"view_wallets"}, "confirm_key": {confirm}}
		if once != "" {
			v.Set("once", once)
		}
		return cc.do("POST", "/console/keys", v, cookie)
	}

	t.Run("WithoutTheKeyAgainNothingIsMade", func(t *testing.T) {
		csrf, once := form()
		for name, typed := range map[string]string{"Nothing": "", "AnotherKeyOfTheMerchant": env.Key(a.merchant, "view_wallets"),
			"AnotherMerchantsKey": other.secret, "ThePublicKey": a.public, "Garbage": "ISSecretKey_test_" + strings.Repeat("0", 64)} {
			n := keys()
			r := submit(csrf, once, typed)
			if r.Status != 403 || !strings.Contains(r.Body, "Type the secret key you signed in with") || strings.Contains(r.Body, `id="new-secret"`) {
				t.Errorf("%s: %d\n%.400s", name, r.Status, r.Body)
			}
			if typed != "" && strings.Contains(r.Body, typed) {
				t.Errorf("%s: the refusal shows what was typed", name)
			}
			if keys() != n {
				t.Errorf("%s: a key was made", name)
			}
		}
	})

	t.Run("WithoutAValidTokenNothingIsMade", func(t *testing.T) {
		csrf, _ := form()
		other := cc.signIn(a.secret, sandboxCookie, nil) // the same merchant's other session
		p := cc.page(sandboxCookie, other, "/console/keys")
		othersOnce := onceField.FindStringSubmatch(p.Body)[1]
		nonce, _, _ := strings.Cut(othersOnce, ".")
		n := keys()
		for name, once := range map[string]string{"None": "", "Made up": ids.Secret() + "." + ids.Secret(), "Malformed": "x.y",
			"AnotherSessions": othersOnce, "ReusedNonceOwnMACGuess": nonce + "." + strings.Repeat("0", 64)} {
			if r := submit(csrf, once, a.secret); r.Status != 400 || !strings.Contains(r.Body, "This form is out of date") {
				t.Errorf("%s: %d\n%.400s", name, r.Status, r.Body)
			}
		}
		if keys() != n {
			t.Error("a key was made without a valid one-time token")
		}
	})

	t.Run("SecondSubmitMakesNothing", func(t *testing.T) {
		csrf, once := form()
		n := keys()
		first := submit(csrf, once, a.secret)
		secret := regexp.MustCompile(`<code id="new-secret">([^<]+)</code>`).FindStringSubmatch(first.Body)
		if first.Status != 201 || secret == nil {
			t.Fatalf("first submit: %d\n%s", first.Status, first.Body)
		}
		keyID := secret[1][:len("ISSecretKey_test_")+12]
		again := submit(csrf, once, a.secret)
		if again.Status != 409 || !strings.Contains(again.Body, "This form was already submitted and created key "+keyID) ||
			strings.Contains(again.Body, secret[1]) {
			t.Errorf("second submit: %d\n%s", again.Status, again.Body)
		}
		if keys() != n+1 {
			t.Errorf("%d keys made by one form", keys()-n)
		}
		if r := env.Do("GET", "/api/v1/wallets/", nil, servicetest.Bearer(secret[1])...); r.Status != 200 {
			t.Errorf("the key the form made: %d", r.Status)
		}
	})

	t.Run("TwoSubmitsAtOnceMakeOne", func(t *testing.T) {
		csrf, once := form()
		n := keys()
		var wg sync.WaitGroup
		status := make([]int, 4)
		for i := range status {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				status[i] = submit(csrf, once, a.secret).Status
			}(i)
		}
		wg.Wait()
		created := 0
		for _, st := range status {
			switch st {
			case 201:
				created++
			case 409:
			default:
				t.Errorf("answer %d", st)
			}
		}
		if created != 1 || keys() != n+1 {
			t.Errorf("four submits of one form at once: answers %v, %d keys made", status, keys()-n)
		}
	})

}
