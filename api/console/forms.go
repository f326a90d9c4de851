package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"paysvc/actors/values/ids"
	"paysvc/api/edge"
)

// Guards of the console's own writes (docs/security.md, "Console sessions"). Most
// console forms call an API route with a per-form Idempotency-Key, so a second
// submit repeats one request. Making an API key is the console's own write, and it
// hands out power, so its form carries two more guards: a one-time token, and the
// signed-in secret key typed again.

// formOnce is a one-time token for a form of purpose, bound to the session: a
// random nonce and its MAC under the session's form secret (its CSRF token), so
// a token is honoured only by the session that rendered it, and a made-up one is
// refused before anything is looked up.
func formOnce(cs *consoleSession, purpose string) string {
	nonce := ids.Secret()
	return nonce + "." + onceMAC(cs, purpose, nonce)
}

func onceMAC(cs *consoleSession, purpose, nonce string) string {
	m := hmac.New(sha256.New, []byte(cs.csrf))
	m.Write([]byte("paysvc console once\x00" + purpose + "\x00" + nonce))
	return hex.EncodeToString(m.Sum(nil))
}

// checkOnce verifies a submitted one-time token of purpose and returns the hash its
// use is recorded under (storage.InsertKeyOnce), or nil when the token is missing,
// malformed or not this session's.
func checkOnce(cs *consoleSession, purpose, token string) []byte {
	nonce, mac, ok := strings.Cut(token, ".")
	if !ok || len(nonce) != 64 || len(mac) != 64 {
		return nil
	}
	if subtle.ConstantTimeCompare([]byte(mac), []byte(onceMAC(cs, purpose, nonce))) != 1 {
		return nil
	}
	return sha256Of(purpose + "\x00" + nonce)
}

// consoleReauth asks the person at the browser to prove again that they hold the
// session's credential before an action that hands out power (making a key): a
// session cookie left in an unattended browser, or taken by some other means, is
// then not enough to mint a key. Today a session is a secret key, so the proof is
// that same key typed again (field confirm_key). This is the seam for team
// sign-in: once a session belongs to a person's account rather than a key, the
// account's second factor is checked here instead, and callers do not change.
// The refusal's text never quotes what was typed.
func (s *Console) consoleReauth(c echo.Context, cs *consoleSession) *edge.Error {
	typed := c.FormValue("confirm_key")
	refused := edge.ClientError(http.StatusForbidden, "reauthentication_failed",
		"Type the secret key you signed in with to confirm. No key was created.")
	if typed == "" || len(typed) > 200 {
		return refused
	}
	p, e := s.verify(c.Request().Context(), typed)
	if e != nil {
		if e.Status >= 500 {
			return e
		}
		return refused
	}
	if p.MerchantID != cs.principal.MerchantID || p.KeyID != cs.principal.KeyID {
		return refused
	}
	return nil
}
