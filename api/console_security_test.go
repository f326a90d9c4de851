package api_test

// The merchant console's own security, through HTTP against a real paysvc
// (docs/security.md, "Console sessions"): cross-origin forms refused, session
// fixation, a cookie after sign-out or expiry, a session on the other environment's
// server, another merchant's ids, a revoked key, a disabled merchant, and a
// restricted key's reach.

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage"
)

// consoleClient speaks to the console as a browser would, but shows every redirect
// and cookie instead of following them.
type consoleClient struct {
	t      *testing.T
	base   string
	origin string // the Origin header of forms
	http   *http.Client
}

func newConsoleClient(t *testing.T, base string) *consoleClient {
	return &consoleClient{t: t, base: base, origin: base, http: &http.Client{Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type consoleResp struct {
	Status   int
	Body     string
	Location string
	Cookies  map[string]*http.Cookie
}

func (cc *consoleClient) do(method, path string, form url.Values, cookies map[string]string, headers ...string) consoleResp {
	cc.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, cc.base+path, body)
	if err != nil {
		cc.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", cc.origin)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	for k, v := range cookies {
		req.AddCookie(&http.Cookie{Name: k, Value: v})
	}
	resp, err := cc.http.Do(req)
	if err != nil {
		cc.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := consoleResp{Status: resp.StatusCode, Body: string(b), Location: resp.Header.Get("Location"), Cookies: map[string]*http.Cookie{}}
	for _, c := range resp.Cookies() {
		out.Cookies[c.Name] = c
	}
	return out
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, html string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(html)
	if m == nil {
		t.Fatalf("no csrf field in page:\n%s", html)
	}
	return m[1]
}

// signIn signs in with key and returns the session cookie's value; the cookie is
// named name (the environment's).
func (cc *consoleClient) signIn(key, name string, extra map[string]string) string {
	cc.t.Helper()
	page := cc.do("GET", "/console/sign-in", nil, nil)
	pre := page.Cookies["console_signin"]
	if page.Status != 200 || pre == nil {
		cc.t.Fatalf("sign-in page: %d, pre-session cookie %v", page.Status, pre)
	}
	cookies := map[string]string{"console_signin": pre.Value}
	for k, v := range extra {
		cookies[k] = v
	}
	r := cc.do("POST", "/console/sign-in", url.Values{"csrf": {csrfOf(cc.t, page.Body)}, "key": {key}}, cookies)
	if r.Status != http.StatusSeeOther || r.Location != "/console" || r.Cookies[name] == nil || r.Cookies[name].Value == "" {
		cc.t.Fatalf("sign in: %d to %q, cookies %v\n%s", r.Status, r.Location, r.Cookies, r.Body)
	}
	ck := r.Cookies[name]
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
		cc.t.Errorf("session cookie is not HttpOnly and SameSite=Strict: %+v", ck)
	}
	return ck.Value
}

// page GETs a console page with the session and returns it.
func (cc *consoleClient) page(name, session, path string) consoleResp {
	cc.t.Helper()
	return cc.do("GET", path, nil, map[string]string{name: session})
}

// signedOut reports whether an answer sends the browser to the sign-in page.
func signedOut(r consoleResp) bool {
	return r.Status == http.StatusSeeOther && strings.HasPrefix(r.Location, "/console/sign-in")
}

const sandboxCookie = "console_session"

func sessionRows(t *testing.T, env *servicetest.Env, keyID string) int {
	t.Helper()
	var n int
	if err := env.Schema.DB.Get(&n, `SELECT count(*) FROM console_sessions WHERE key_id = $1`, keyID); err != nil {
		t.Fatal(err)
	}
	return n
}

// preview makes a payment file awaiting approval and returns its file id.
func preview(t *testing.T, b *bundle) string {
	t.Helper()
	r := b.post("/api/v1/send-money/initiation/", b2cFile("YES", "254708374149", "254712340011"))
	if r.Status != 201 {
		t.Fatalf("initiate: %d %s", r.Status, r.Body)
	}
	return r.Map(t)["file_id"].(string)
}

func fileStatus(t *testing.T, b *bundle, fileID string) string {
	t.Helper()
	r := b.post("/api/v1/send-money/status/", map[string]any{"file_id": fileID})
	if r.Status != 200 {
		t.Fatalf("status: %d %s", r.Status, r.Body)
	}
	return r.Map(t)["status"].(string)
}

func TestConsoleSecurity(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, nil)
	a := newBundle(t, env, "Merchant A")
	bm := newBundle(t, env, "Merchant B")
	a.deposit(t, a.settlement, "10000")
	cc := newConsoleClient(t, env.BaseURL)

	t.Run("SignInShowsTheMerchantAndKeepsNoKey", func(t *testing.T) {
		s := cc.signIn(a.secret, sandboxCookie, nil)
		p := cc.page(sandboxCookie, s, "/console")
		if p.Status != 200 || !strings.Contains(p.Body, "Merchant A") {
			t.Fatalf("overview: %d\n%s", p.Status, p.Body)
		}
		if strings.Contains(p.Body, a.secret) || strings.Contains(s, a.secret) {
			t.Fatal("the secret key is on the page or in the cookie")
		}
		if strings.Contains(env.Logs.String(), a.secret) || strings.Contains(env.Logs.String(), s) {
			t.Fatal("the secret key or the session token is in the service's logs")
		}
		var stored int
		if err := env.Schema.DB.Get(&stored, `SELECT count(*) FROM console_sessions WHERE token_hash = sha256(convert_to($1, 'UTF8'))`, s); err != nil || stored != 1 {
			t.Fatalf("the session is not stored under the hash of its token (%d, %v)", stored, err)
		}
		var raw int
		if err := env.Schema.DB.Get(&raw, `SELECT count(*) FROM console_sessions WHERE encode(token_hash, 'escape') = $1`, s); err != nil || raw != 0 {
			t.Fatalf("the raw token is stored (%d, %v)", raw, err)
		}
	})

	t.Run("WrongKeysRefused", func(t *testing.T) {
		page := cc.do("GET", "/console/sign-in", nil, nil)
		pre := page.Cookies["console_signin"].Value
		for _, key := range []string{a.public, "ISSecretKey_test_" + strings.Repeat("0", 64), "ISSecretKey_live_" + strings.Repeat("0", 64)} {
			r := cc.do("POST", "/console/sign-in", url.Values{"csrf": {csrfOf(t, page.Body)}, "key": {key}},
				map[string]string{"console_signin": pre})
			if r.Status != 401 || r.Cookies[sandboxCookie] != nil {
				t.Errorf("sign in with %.20s...: %d, cookies %v", key, r.Status, r.Cookies)
			}
		}
	})

	t.Run("CSRFFromAnotherOriginRefused", func(t *testing.T) {
		s := cc.signIn(a.secret, sandboxCookie, nil)
		file := preview(t, a)
		page := cc.page(sandboxCookie, s, "/console/payment-files/"+file)
		if page.Status != 200 || !strings.Contains(page.Body, `id="approve"`) {
			t.Fatalf("file page: %d\n%s", page.Status, page.Body)
		}
		token := csrfOf(t, page.Body)
		action := "/console/payment-files/" + file + "/approve"
		form := url.Values{"csrf": {token}, "idem": {"csrf-test"}}
		cookie := map[string]string{sandboxCookie: s}
		for name, headers := range map[string][]string{
			"OtherOrigin":        {"Origin", "https://evil.example", "Sec-Fetch-Site", ""},
			"CrossSite":          {"Sec-Fetch-Site", "cross-site"},
			"SameSiteOtherPort":  {"Origin", "http://127.0.0.1:1", "Sec-Fetch-Site", "same-site"},
			"NoOriginAtAll":      {"Origin", "", "Sec-Fetch-Site", ""},
			"NullOrigin":         {"Origin", "null"},
			"OtherOriginNoFetch": {"Origin", "http://evil.example", "Sec-Fetch-Site", ""},
		} {
			r := cc.do("POST", action, form, cookie, headers...)
			if r.Status != 403 || !strings.Contains(r.Body, "csrf_refused") {
				t.Errorf("%s: %d %s", name, r.Status, r.Body)
			}
		}
		// Same origin, but without the session's token, or with another session's.
		other := cc.signIn(a.secret, sandboxCookie, nil)
		otherToken := csrfOf(t, cc.page(sandboxCookie, other, "/console").Body)
		for name, tok := range map[string]string{"NoToken": "", "OtherSessionsToken": otherToken, "Guess": strings.Repeat("a", 64)} {
			r := cc.do("POST", action, url.Values{"csrf": {tok}, "idem": {"csrf-test"}}, cookie)
			if r.Status != 403 {
				t.Errorf("%s: %d %s", name, r.Status, r.Body)
			}
		}
		// A sign-in posted from another site is refused too (login CSRF).
		signin := cc.do("GET", "/console/sign-in", nil, nil)
		r := cc.do("POST", "/console/sign-in", url.Values{"csrf": {csrfOf(t, signin.Body)}, "key": {bm.secret}},
			map[string]string{"console_signin": signin.Cookies["console_signin"].Value}, "Origin", "https://evil.example")
		if r.Status != 403 || r.Cookies[sandboxCookie] != nil {
			t.Errorf("cross-site sign-in: %d %v", r.Status, r.Cookies)
		}
		if st := fileStatus(t, a, file); st != "PREVIEW-AND-APPROVE" {
			t.Fatalf("a refused form changed the file: %s", st)
		}
		// The same form from the page itself is applied: the refusals above were the
		// origin and the token, nothing else.
		ok := cc.do("POST", action, form, cookie)
		if ok.Status != http.StatusSeeOther || !strings.Contains(ok.Location, "done=approved") {
			t.Fatalf("same-origin approve: %d %q %s", ok.Status, ok.Location, ok.Body)
		}
		if st := fileStatus(t, a, file); st == "PREVIEW-AND-APPROVE" || st == "CANCELLED" {
			t.Fatalf("approved file is %s", st)
		}
	})

	t.Run("SessionFixation", func(t *testing.T) {
		// An id the attacker chose is never adopted.
		planted := "attacker-chosen-session-id"
		s := cc.signIn(a.secret, sandboxCookie, map[string]string{sandboxCookie: planted})
		if s == planted {
			t.Fatal("sign-in adopted the planted session id")
		}
		if r := cc.page(sandboxCookie, planted, "/console"); !signedOut(r) {
			t.Fatalf("the planted id opens a session: %d", r.Status)
		}
		// A real session planted in the victim's browser (the attacker's own) is ended
		// by the victim's sign-in, which issues a fresh one.
		attacker := cc.signIn(bm.secret, sandboxCookie, nil)
		victim := cc.signIn(a.secret, sandboxCookie, map[string]string{sandboxCookie: attacker})
		if victim == attacker {
			t.Fatal("sign-in kept the session the browser brought")
		}
		if r := cc.page(sandboxCookie, attacker, "/console"); !signedOut(r) {
			t.Fatalf("the planted session still works after the victim's sign-in: %d", r.Status)
		}
		if r := cc.page(sandboxCookie, victim, "/console"); r.Status != 200 || !strings.Contains(r.Body, "Merchant A") {
			t.Fatalf("victim's own session: %d", r.Status)
		}
	})

	t.Run("CookieAfterSignOutRefused", func(t *testing.T) {
		s := cc.signIn(a.secret, sandboxCookie, nil)
		page := cc.page(sandboxCookie, s, "/console")
		r := cc.do("POST", "/console/sign-out", url.Values{"csrf": {csrfOf(t, page.Body)}}, map[string]string{sandboxCookie: s})
		if !signedOut(r) || r.Cookies[sandboxCookie] == nil || r.Cookies[sandboxCookie].MaxAge >= 0 {
			t.Fatalf("sign out: %d %q %v", r.Status, r.Location, r.Cookies)
		}
		var n int
		if err := env.Schema.DB.Get(&n, `SELECT count(*) FROM console_sessions WHERE token_hash = sha256(convert_to($1, 'UTF8'))`, s); err != nil || n != 0 {
			t.Fatalf("the session row outlived sign-out (%d, %v)", n, err)
		}
		for _, path := range []string{"/console", "/console/keys", "/console/wallets"} {
			if r := cc.page(sandboxCookie, s, path); !signedOut(r) {
				t.Errorf("%s with the old cookie: %d", path, r.Status)
			}
		}
		file := preview(t, a)
		r = cc.do("POST", "/console/payment-files/"+file+"/approve", url.Values{"csrf": {csrfOf(t, page.Body)}, "idem": {"x"}},
			map[string]string{sandboxCookie: s})
		if !signedOut(r) || fileStatus(t, a, file) != "PREVIEW-AND-APPROVE" {
			t.Fatalf("an action with the old cookie: %d", r.Status)
		}
	})

	t.Run("CookieAfterExpiryRefused", func(t *testing.T) {
		for name, backdate := range map[string]string{
			"Idle":     `UPDATE console_sessions SET last_seen_at = now() - interval '31 minutes' WHERE token_hash = sha256(convert_to($1, 'UTF8'))`,
			"Absolute": `UPDATE console_sessions SET created_at = now() - interval '12 hours 1 minute' WHERE token_hash = sha256(convert_to($1, 'UTF8'))`,
		} {
			s := cc.signIn(a.secret, sandboxCookie, nil)
			if r := cc.page(sandboxCookie, s, "/console"); r.Status != 200 {
				t.Fatalf("%s: fresh session %d", name, r.Status)
			}
			if _, err := env.Schema.DB.Exec(backdate, s); err != nil {
				t.Fatal(err)
			}
			r := cc.page(sandboxCookie, s, "/console")
			if !signedOut(r) || !strings.Contains(r.Location, "expired") {
				t.Errorf("%s expiry: %d %q", name, r.Status, r.Location)
			}
			var n int
			if err := env.Schema.DB.Get(&n, `SELECT count(*) FROM console_sessions WHERE token_hash = sha256(convert_to($1, 'UTF8'))`, s); err != nil || n != 0 {
				t.Errorf("%s: the expired session is still stored", name)
			}
		}
	})

	t.Run("OtherEnvironmentsSessionRefused", func(t *testing.T) {
		live := servicetest.StartPeer(t, env, "live")
		lm := live.Merchant("Live Merchant")
		lc := newConsoleClient(t, live.BaseURL)
		lc.origin = strings.Replace(live.BaseURL, "http://", "https://", 1) // a live console is served over TLS
		// A sandbox key cannot sign in on the live server.
		page := lc.do("GET", "/console/sign-in", nil, nil)
		r := lc.do("POST", "/console/sign-in", url.Values{"csrf": {csrfOf(t, page.Body)}, "key": {a.secret}},
			map[string]string{"console_signin": page.Cookies["console_signin"].Value})
		if r.Status != 401 || !strings.Contains(r.Body, "Invalid token for live environment") {
			t.Fatalf("sandbox key on live: %d", r.Status)
		}
		liveSession := lc.signIn(lm.SecretKey, "__Host-console_session", nil)
		if ck := lc.do("GET", "/console", nil, map[string]string{"__Host-console_session": liveSession}); ck.Status != 200 {
			t.Fatalf("live session on live: %d", ck.Status)
		}
		sandboxSession := cc.signIn(a.secret, sandboxCookie, nil)
		// Each session on the other's server, under either cookie name: refused, and
		// the session that was presented to the wrong server is ended.
		for _, name := range []string{"__Host-console_session", sandboxCookie} {
			if r := lc.do("GET", "/console", nil, map[string]string{name: sandboxSession}); r.Status == 200 {
				t.Errorf("sandbox session opened the live console (cookie %s)", name)
			}
			if r := cc.do("GET", "/console", nil, map[string]string{name: liveSession}); r.Status == 200 {
				t.Errorf("live session opened the sandbox console (cookie %s)", name)
			}
		}
		if r := lc.do("GET", "/console", nil, map[string]string{"__Host-console_session": liveSession}); !signedOut(r) {
			t.Errorf("a live session shown to the sandbox server should be ended: %d", r.Status)
		}
	})

	t.Run("OtherMerchantsIDsAre404", func(t *testing.T) {
		fileA := preview(t, a)
		keyA := a.secret[:len("ISSecretKey_test_")+12]
		sb := cc.signIn(bm.secret, sandboxCookie, nil)
		home := cc.page(sandboxCookie, sb, "/console")
		tok := csrfOf(t, home.Body)
		ck := map[string]string{sandboxCookie: sb}
		for _, path := range []string{"/console/payment-files/" + fileA, "/console/wallets/" + a.settlement} {
			if r := cc.page(sandboxCookie, sb, path); r.Status != 404 {
				t.Errorf("B reads A's %s: %d", path, r.Status)
			}
		}
		for _, path := range []string{"/console/payment-files/" + fileA + "/approve", "/console/payment-files/" + fileA + "/cancel",
			"/console/keys/" + keyA + "/revoke"} {
			if r := cc.do("POST", path, url.Values{"csrf": {tok}, "idem": {"cross-" + path}}, ck); r.Status != 404 {
				t.Errorf("B acts on A's %s: %d %s", path, r.Status, r.Body)
			}
		}
		if st := fileStatus(t, a, fileA); st != "PREVIEW-AND-APPROVE" {
			t.Fatalf("B changed A's file: %s", st)
		}
		if r := a.get("/api/v1/wallets/"); r.Status != 200 {
			t.Fatalf("B revoked A's key: %d", r.Status)
		}
	})

	// The owner revokes one of its keys from the keys page: the key stops
	// authenticating on the API at once, and the key that revoked it goes on.
	t.Run("OwnerRevokesAKey", func(t *testing.T) {
		key := env.Key(a.merchant, "view_wallets")
		keyID := key[:len("ISSecretKey_test_")+12]
		hdr := "Bearer " + key
		if r := env.Do("GET", "/api/v1/wallets/", nil, "Authorization", hdr); r.Status != 200 {
			t.Fatalf("the new key before revocation: %d %s", r.Status, r.Body)
		}
		sa := cc.signIn(a.secret, sandboxCookie, nil)
		tok := csrfOf(t, cc.page(sandboxCookie, sa, "/console/keys").Body)
		r := cc.do("POST", "/console/keys/"+keyID+"/revoke", url.Values{"csrf": {tok}}, map[string]string{sandboxCookie: sa})
		if r.Status != 303 {
			t.Fatalf("revoke from the console: %d %s", r.Status, r.Body)
		}
		if r := env.Do("GET", "/api/v1/wallets/", nil, "Authorization", hdr); r.Status != 401 {
			t.Errorf("the revoked key still authenticates: %d %s", r.Status, r.Body)
		}
		if r := a.get("/api/v1/wallets/"); r.Status != 200 {
			t.Errorf("the owner's own key after revoking another: %d", r.Status)
		}
	})

	t.Run("RevokedKeyAndDisabledMerchantEndTheSession", func(t *testing.T) {
		key := env.Key(a.merchant, "view_wallets")
		keyID := key[:len("ISSecretKey_test_")+12]
		s := cc.signIn(key, sandboxCookie, nil)
		if _, err := storage.RevokeKey(context.Background(), env.Schema.DB, keyID); err != nil {
			t.Fatal(err)
		}
		if r := cc.page(sandboxCookie, s, "/console/wallets"); !signedOut(r) || !strings.Contains(r.Location, "revoked") {
			t.Errorf("revoked key's session: %d %q", r.Status, r.Location)
		}
		if n := sessionRows(t, env, keyID); n != 0 {
			t.Errorf("the revoked key's session is still stored (%d)", n)
		}
		c := newBundle(t, env, "Merchant C")
		sc := cc.signIn(c.secret, sandboxCookie, nil)
		if _, err := storage.SetMerchantEnabled(context.Background(), env.Schema.DB, c.merchant, false); err != nil {
			t.Fatal(err)
		}
		if r := cc.page(sandboxCookie, sc, "/console"); !signedOut(r) || !strings.Contains(r.Location, "disabled") {
			t.Errorf("disabled merchant's session: %d %q", r.Status, r.Location)
		}
	})

	t.Run("RestrictedKeyReachesOnlyItsPermissions", func(t *testing.T) {
		key := env.Key(a.merchant, "view_wallets", "view_files")
		s := cc.signIn(key, sandboxCookie, nil)
		home := cc.page(sandboxCookie, s, "/console")
		for _, hidden := range []string{`href="/console/keys"`, `href="/console/webhooks"`, `href="/console/refunds"`, `href="/console/collections"`} {
			if strings.Contains(home.Body, hidden) {
				t.Errorf("navigation offers %s to a key without it", hidden)
			}
		}
		for _, shown := range []string{`href="/console/wallets"`, `href="/console/payment-files"`} {
			if !strings.Contains(home.Body, shown) {
				t.Errorf("navigation hides %s from a key that has it", shown)
			}
		}
		for _, path := range []string{"/console/keys", "/console/webhooks", "/console/refunds", "/console/collections", "/console/mailbox",
			"/console/subscriptions", "/console/payment-links"} {
			if r := cc.page(sandboxCookie, s, path); r.Status != 403 {
				t.Errorf("%s: %d", path, r.Status)
			}
		}
		file := preview(t, a)
		page := cc.page(sandboxCookie, s, "/console/payment-files/"+file)
		if page.Status != 200 || strings.Contains(page.Body, `id="approve"`) {
			t.Fatalf("a key without approve_files is offered Approve: %d", page.Status)
		}
		tok := csrfOf(t, page.Body)
		for _, act := range []string{"approve", "cancel"} {
			if r := cc.do("POST", "/console/payment-files/"+file+"/"+act, url.Values{"csrf": {tok}, "idem": {"r-" + act}},
				map[string]string{sandboxCookie: s}); r.Status != 403 {
				t.Errorf("%s without the permission: %d", act, r.Status)
			}
		}
		if r := cc.do("POST", "/console/keys", url.Values{"csrf": {tok}, "permission": {"approve_files"}}, map[string]string{sandboxCookie: s}); r.Status != 403 {
			t.Errorf("a restricted key made a key: %d", r.Status)
		}
		if st := fileStatus(t, a, file); st != "PREVIEW-AND-APPROVE" {
			t.Fatalf("file is %s", st)
		}
	})
}

// The console's lists page by keyset, 50 at a time, with nothing lost or repeated
// between pages; the collection search finds by invoice id, reference, phone in any
// of its spellings and email, and only the merchant's own.
func TestConsoleListsAndSearch(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, nil)
	b := newBundle(t, env, "Pages")
	b.deposit(t, b.settlement, "100000")
	other := newBundle(t, env, "Other")
	for i := 0; i < 52; i++ {
		preview(t, b)
	}
	cc := newConsoleClient(t, env.BaseURL)
	s := cc.signIn(b.secret, sandboxCookie, nil)
	fileLink := regexp.MustCompile(`href="/console/payment-files/([A-Z0-9]+)"`)
	nextLink := regexp.MustCompile(`<a href="([^"]+)" rel="next">`)
	seen := map[string]bool{}
	path, pages := "/console/payment-files", 0
	for path != "" {
		p := cc.page(sandboxCookie, s, strings.ReplaceAll(path, "&amp;", "&"))
		if p.Status != 200 {
			t.Fatalf("%s: %d", path, p.Status)
		}
		ids := fileLink.FindAllStringSubmatch(p.Body, -1)
		if pages == 0 && len(ids) != 50 {
			t.Fatalf("first page lists %d files, want 50", len(ids))
		}
		for _, m := range ids {
			if seen[m[1]] {
				t.Fatalf("file %s listed twice", m[1])
			}
			seen[m[1]] = true
		}
		path = ""
		if m := nextLink.FindStringSubmatch(p.Body); m != nil {
			path = m[1]
		}
		pages++
	}
	if len(seen) != 52 || pages != 2 {
		t.Fatalf("%d files over %d pages, want 52 over 2", len(seen), pages)
	}

	collect := func(bb *bundle, phone, ref string, extra map[string]any) string {
		body := map[string]any{"phone_number": phone, "amount": "50", "api_ref": ref}
		for k, v := range extra {
			body[k] = v
		}
		r := bb.post("/api/v1/payment/mpesa-stk-push/", body)
		if r.Status != 200 {
			t.Fatalf("stk push: %d %s", r.Status, r.Body)
		}
		return r.Map(t)["invoice"].(map[string]any)["invoice_id"].(string)
	}
	first := collect(b, "254712345678", "order-A", map[string]any{"email": "Wanjiku@Example.com"})
	second := collect(b, "254722000111", "order-B", nil)
	foreign := collect(other, "254712345678", "order-A", nil) // same phone and reference, other merchant
	for query, want := range map[string]string{first: first, "order-A": first, "0712 345 678": first, "+254712345678": first,
		"wanjiku@example.com": first, "order-B": second, "0722000111": second, foreign: "", "nothing-like-it": ""} {
		p := cc.page(sandboxCookie, s, "/console/collections?q="+url.QueryEscape(query))
		if p.Status != 200 {
			t.Fatalf("search %q: %d", query, p.Status)
		}
		for _, id := range []string{first, second, foreign} {
			row := strings.Contains(p.Body, "<td><code>"+id+"</code></td>") // not the query echoed in the form
			if row != (id == want) {
				t.Errorf("search %q: lists %s = %v, want only %q", query, id, row, want)
			}
		}
	}
}
