package console

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"paysvc/actors/values/ids"
	"paysvc/api/edge"
	"paysvc/storage"
)

// Console sessions (docs/security.md, "Console sessions"). A secret key entered once
// at sign-in becomes a session: a random token in an HttpOnly, SameSite=Strict
// cookie (__Host- and Secure whenever the console is served over https, behind a
// TLS proxy too: consoleHTTPS), stored server-side only as its
// SHA-256. The session names the key; every request reads the key's permissions,
// revocation and its merchant's status afresh, so revoking the key or disabling the
// merchant ends the session at once. Unsafe methods need the session's
// synchroniser token in the form and a same-origin request (Origin and
// Sec-Fetch-Site).

const (
	ctxConsole = "paysvc.console" // *consoleSession
	// consoleSignInCookie holds the pre-session token of the sign-in form (login CSRF).
	consoleSignInCookie = "console_signin"
	consoleHome         = "/console"
	consoleSignInPath   = "/console/sign-in"
)

// consoleSession is the signed-in merchant as a console request sees it.
type consoleSession struct {
	principal *edge.Principal
	merchant  string // the merchant's name
	csrf      string
	tokenHash []byte
}

// full reports whether the session's key is the merchant's unrestricted key.
func (cs *consoleSession) full() bool { return cs.principal.Unrestricted }

func consoleOf(c echo.Context) *consoleSession {
	cs, _ := c.Get(ctxConsole).(*consoleSession)
	return cs
}

// consoleHTTPS reports whether browsers reach this console over https: always on a
// live server, and on a sandbox whose public base URL is https. It is decided by
// configuration, not by the request: behind a TLS-terminating proxy the request
// paysvc sees is plain http (r.TLS is nil) though the browser's is https, and a
// session cookie set without Secure there would also be sent, and could be
// planted, over plain http to that host.
func (s *Console) consoleHTTPS() bool {
	return s.cfg.Environment == "live" || strings.HasPrefix(strings.ToLower(s.cfg.PublicBaseURL), "https://")
}

// consoleCookieName differs by environment, so a browser holding both a sandbox and
// a live session never sends one to the other's server under the expected name.
// Over https the name has the __Host- prefix: the browser keeps it only if Secure,
// for this host exactly, at path /, so neither a sibling subdomain nor a plain-http
// answer can set or replace it. Only a sandbox reached over plain http (local
// development) keeps the unprefixed name, which a browser would not accept there.
func (s *Console) consoleCookieName() string {
	switch {
	case s.cfg.Environment == "live":
		return "__Host-console_session"
	case s.consoleHTTPS():
		return "__Host-console_sandbox_session"
	}
	return "console_session"
}

func (s *Console) consoleCookie(c echo.Context, name, value string, maxAge int) *http.Cookie {
	path := "/console"
	https := s.consoleHTTPS()
	if https {
		path = "/" // required by __Host-
	}
	return &http.Cookie{Name: name, Value: value, Path: path, MaxAge: maxAge, HttpOnly: true, Secure: https || c.Request().TLS != nil,
		SameSite: http.SameSiteStrictMode}
}

func sha256Of(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// sameOrigin is the second CSRF defence, before the token: a browser names where an
// unsafe request comes from. Sec-Fetch-Site, when sent, must be same-origin; Origin
// must be sent and name this host (and https on a live server). A request with
// neither is refused: every browser that can hold the cookie sends Origin on POST.
func (s *Console) sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" || origin == "null" {
		return false
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host != r.Host || (u.Scheme != "https" && u.Scheme != "http") {
		return false
	}
	return s.cfg.Environment != "live" || u.Scheme == "https"
}

func unsafeMethod(m string) bool {
	return m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions
}

// errCSRF is the refusal of a cross-site or tokenless console form.
var errCSRF = &edge.Error{Status: http.StatusForbidden, Type: "client_error", Code: "csrf_refused",
	Detail: "This form did not come from this console page. Reload the page and try again."}

// toSignIn sends the browser to the sign-in page: the console's answer to a missing,
// expired or ended session, for pages and forms alike (a form is never applied).
func toSignIn(c echo.Context, reason string) error {
	target := consoleSignInPath
	if reason != "" {
		target += "?reason=" + url.QueryEscape(reason)
	}
	return c.Redirect(http.StatusSeeOther, target)
}

// Authenticate admits a request with a live session of this server's environment,
// whose key is still a valid secret key of an enabled merchant; for an unsafe
// method, from this origin with the session's form token.
func (s *Console) Authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if unsafeMethod(r.Method) && !s.sameOrigin(r) {
			return errCSRF
		}
		ck, err := r.Cookie(s.consoleCookieName())
		if err != nil || ck.Value == "" || len(ck.Value) > 128 {
			return toSignIn(c, "")
		}
		h := sha256Of(ck.Value)
		sess, err := storage.TouchConsoleSession(r.Context(), s.db, h, s.cfg.Idle, s.cfg.MaxAge)
		if errors.Is(err, storage.ErrNotFound) {
			c.SetCookie(s.consoleCookie(c, s.consoleCookieName(), "", -1))
			return toSignIn(c, "expired")
		}
		if err != nil {
			return err
		}
		env := s.cfg.Environment
		reason := ""
		switch {
		case sess.Environment != env || sess.KeyEnvironment != env || sess.MerchantEnvironment != env || sess.KeyKind != "secret":
			reason = "environment"
		case sess.RevokedAt != nil:
			reason = "revoked"
		case !sess.MerchantEnabled:
			reason = "disabled"
		}
		if reason != "" {
			// The session can never work again: end it here.
			if err := storage.DeleteConsoleSession(r.Context(), s.db, h); err != nil {
				return err
			}
			c.SetCookie(s.consoleCookie(c, s.consoleCookieName(), "", -1))
			return toSignIn(c, reason)
		}
		if unsafeMethod(r.Method) {
			tok := c.FormValue("csrf")
			if subtle.ConstantTimeCompare([]byte(tok), []byte(sess.CSRFToken)) != 1 {
				return errCSRF
			}
		}
		p := &edge.Principal{MerchantID: sess.MerchantID, KeyID: sess.KeyID, Kind: "secret", Permissions: sess.Permissions,
			Unrestricted: sess.Unrestricted}
		edge.SetPrincipal(c, p)
		c.Set(ctxConsole, &consoleSession{principal: p, merchant: sess.MerchantName, csrf: sess.CSRFToken, tokenHash: h})
		consoleHeaders(c.Response().Header())
		return next(c)
	}
}

// signInMessages are the sign-in page's notices, by the reason a session ended.
var signInMessages = map[string]string{
	"expired":     "Your session has ended. Sign in again.",
	"signed-out":  "You have signed out.",
	"revoked":     "The key of this session has been revoked. Sign in with a valid key.",
	"disabled":    edge.MsgCannotTransact,
	"environment": "That session belongs to another environment. Sign in with a key of this one.",
}

// consoleSignInPage shows the sign-in form. Its pre-session token (a cookie and the
// same value in the form) with the origin check refuses a sign-in posted from
// another site, which could otherwise sign the merchant into someone else's account.
func (s *Console) consoleSignInPage(c echo.Context) error {
	pre := ids.Secret()
	c.SetCookie(s.consoleCookie(c, consoleSignInCookie, pre, 3600))
	return s.renderSignIn(c, http.StatusOK, pre, signInMessages[c.QueryParam("reason")], "")
}

func (s *Console) renderSignIn(c echo.Context, status int, pre, notice, problem string) error {
	return s.renderConsole(c, status, "sign-in", consoleView{Title: "Sign in", CSRF: pre,
		Data: map[string]string{"Notice": notice, "Problem": problem}})
}

// consoleSignIn turns a secret key into a session. The key is checked exactly as
// the API checks a Bearer key (environment, revocation, merchant enabled) and is
// never stored or sent back. A session id the browser brought is never adopted: it
// is ended, and a fresh token is issued (session fixation).
func (s *Console) consoleSignIn(c echo.Context) error {
	r := c.Request()
	if !s.sameOrigin(r) {
		return errCSRF
	}
	pre, err := r.Cookie(consoleSignInCookie)
	if err != nil || pre.Value == "" || subtle.ConstantTimeCompare([]byte(pre.Value), []byte(c.FormValue("csrf"))) != 1 {
		return errCSRF
	}
	ctx := r.Context()
	if old, err := r.Cookie(s.consoleCookieName()); err == nil && old.Value != "" && len(old.Value) <= 128 {
		if err := storage.DeleteConsoleSession(ctx, s.db, sha256Of(old.Value)); err != nil {
			return err
		}
	}
	key := c.FormValue("key")
	if key == "" || len(key) > 200 {
		return s.renderSignIn(c, http.StatusUnauthorized, pre.Value, "", "Enter a secret key.")
	}
	p, e := s.verify(ctx, key)
	if e != nil {
		if e.Status >= 500 {
			return e
		}
		msg := e.Detail
		if msg == edge.MsgInvalidToken {
			msg = "That is not a valid secret key of this environment."
		}
		return s.renderSignIn(c, e.Status, pre.Value, "", msg)
	}
	if err := storage.DeleteExpiredConsoleSessions(ctx, s.db, s.cfg.Idle, s.cfg.MaxAge); err != nil {
		return err
	}
	if err := storage.DeleteOldConsoleFormUses(ctx, s.db, s.cfg.MaxAge); err != nil {
		return err
	}
	token := ids.Secret()
	if err := storage.InsertConsoleSession(ctx, s.db, sha256Of(token), p.MerchantID, p.KeyID, s.cfg.Environment, ids.Secret()); err != nil {
		return err
	}
	c.SetCookie(s.consoleCookie(c, consoleSignInCookie, "", -1))
	c.SetCookie(s.consoleCookie(c, s.consoleCookieName(), token, int(s.cfg.MaxAge/time.Second)))
	return c.Redirect(http.StatusSeeOther, consoleHome)
}

// consoleSignOut ends the session server-side, so the cookie is worthless even if a
// copy of it survives in the browser.
func (s *Console) consoleSignOut(c echo.Context) error {
	if err := storage.DeleteConsoleSession(c.Request().Context(), s.db, consoleOf(c).tokenHash); err != nil {
		return err
	}
	c.SetCookie(s.consoleCookie(c, s.consoleCookieName(), "", -1))
	return toSignIn(c, "signed-out")
}
