package api

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"

	"paysvc/api/edge"
	"paysvc/storage"
)

// The four 401 messages of the interface, word for word.
const (
	msgWrongEnv       = "Invalid token for live environment"
	msgNoCredentials  = "No credentials provided"
	msgSpacesInBearer = "Bearer string should not contain spaces"
)

// keyCache keeps recent key lookups so a busy merchant does not cost a query per
// request. Entries live for ttl, which bounds how long a revoked key still works;
// now is the clock that ages them (Config.Now), so a test can outlive the ttl
// without waiting for it.
type keyCache struct {
	mu  sync.Mutex
	ttl time.Duration
	now func() time.Time
	m   map[[32]byte]cachedKey
}

// fresh: a cached lookup made at is still trusted.
func (c *keyCache) fresh(at time.Time) bool { return c.now().Sub(at) < c.ttl }

type cachedKey struct {
	key storage.APIKey
	err error
	at  time.Time
}

// forget drops the cached lookups of one key: a revocation made through this
// process (the console) takes effect here at once; other api instances read the key
// again within the TTL.
func (c *keyCache) forget(keyID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for h, k := range c.m {
		if k.key.KeyID == keyID {
			delete(c.m, h)
		}
	}
}

type authenticator struct {
	db    *sqlx.DB
	env   string // sandbox or live
	cache keyCache
}

func newAuthenticator(db *sqlx.DB, env string, ttl time.Duration, now func() time.Time) *authenticator {
	if now == nil {
		now = time.Now
	}
	return &authenticator{db: db, env: env, cache: keyCache{ttl: ttl, now: now, m: map[[32]byte]cachedKey{}}}
}

// lookup finds a key by its hash, through the cache.
func (a *authenticator) lookup(ctx context.Context, key string) (storage.APIKey, error) {
	h := sha256.Sum256([]byte(key))
	a.cache.mu.Lock()
	if c, ok := a.cache.m[h]; ok && a.cache.fresh(c.at) {
		a.cache.mu.Unlock()
		return c.key, c.err
	}
	a.cache.mu.Unlock()
	k, err := storage.KeyByHash(ctx, a.db, h[:])
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return k, err // not cached: a database fault is not an answer
	}
	a.cache.mu.Lock()
	if len(a.cache.m) > 100_000 {
		clear(a.cache.m)
	}
	a.cache.m[h] = cachedKey{key: k, err: err, at: a.cache.now()}
	a.cache.mu.Unlock()
	return k, err
}

// knownSecret reports whether the request's Bearer token is a secret key the cache
// already holds as valid: no database is asked, so a flood cannot use it as one.
func (a *authenticator) knownSecret(r *http.Request) bool {
	tok, e := bearer(r)
	if e != nil || !strings.HasPrefix(tok, edge.SecretPrefix) {
		return false
	}
	h := sha256.Sum256([]byte(tok))
	a.cache.mu.Lock()
	c, ok := a.cache.m[h]
	a.cache.mu.Unlock()
	return ok && c.err == nil && a.cache.fresh(c.at) && c.key.Kind == "secret" && c.key.RevokedAt == nil &&
		c.key.Environment == a.env && c.key.MerchantEnvironment == a.env && c.key.MerchantEnabled
}

func unauthorized(msg string) *edge.Error {
	return &edge.Error{Status: http.StatusUnauthorized, Type: "client_error", Code: "authentication_failed", Detail: msg}
}

// bearer extracts the secret key from the Authorization header, with the
// interface's messages for a missing or malformed header.
func bearer(r *http.Request) (string, *edge.Error) {
	h := r.Header.Get("Authorization")
	if strings.TrimSpace(h) == "" {
		return "", unauthorized(msgNoCredentials)
	}
	// Split on the first space without allocating the parts (once per request):
	// scheme, then exactly one token; a further space is the interface's
	// "spaces" message.
	scheme, tok, found := strings.Cut(strings.TrimSpace(h), " ")
	if !strings.EqualFold(scheme, "bearer") {
		return "", unauthorized(msgNoCredentials)
	}
	if !found {
		return "", unauthorized(msgNoCredentials)
	}
	if strings.Contains(tok, " ") {
		return "", unauthorized(msgSpacesInBearer)
	}
	return tok, nil
}

// publicKeyHeaders are every spelling of the public-key header seen from clients.
var publicKeyHeaders = []string{"X-SERVICE-PUBLIC-API-KEY", "INTASEND_PUBLIC_API_KEY", "X-IntaSend-Public-API-Key"}

// publicKey returns the public key from a header or the body's public_key.
func publicKey(c echo.Context) string {
	for _, h := range publicKeyHeaders {
		if v := strings.TrimSpace(c.Request().Header.Get(h)); v != "" {
			return v
		}
	}
	// The body's text is judged after authentication (edge.ReadBody in the handler), so a
	// bad field is a 400 naming it, not a missing key.
	raw, err := edge.UnreadBody(c)
	if err != nil {
		return ""
	}
	if b, err := edge.ParseBody(raw); err == nil {
		if v, err := b.Str("public_key", false, 200, nil); err == nil {
			return v
		}
	}
	return ""
}

// verify checks a key of the given kind against the store and the environment.
func (a *authenticator) verify(ctx context.Context, key, kind string) (*edge.Principal, *edge.Error) {
	prefix := edge.SecretPrefix
	if kind == "public" {
		prefix = edge.PublicPrefix
	}
	if !strings.HasPrefix(key, prefix) {
		return nil, unauthorized(edge.MsgInvalidToken)
	}
	rest := key[len(prefix):]
	// envMarker starts with "_": compare the rest of it, without building a string.
	if !strings.HasPrefix(rest, edge.EnvMarker(a.env)[1:]) {
		if strings.HasPrefix(rest, "test_") || strings.HasPrefix(rest, "live_") {
			return nil, unauthorized(msgWrongEnv)
		}
		return nil, unauthorized(edge.MsgInvalidToken)
	}
	k, err := a.lookup(ctx, key)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, unauthorized(edge.MsgInvalidToken)
	}
	if err != nil {
		return nil, &edge.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "unavailable",
			Detail: "Authentication is temporarily unavailable; retry shortly.", RetryAfter: 1}
	}
	// The merchant's environment too: a key is a capability of its merchant, and a
	// key row that disagreed with its merchant must not open the other environment.
	if k.Kind != kind || k.RevokedAt != nil || k.Environment != a.env || k.MerchantEnvironment != a.env {
		return nil, unauthorized(edge.MsgInvalidToken)
	}
	if !k.MerchantEnabled {
		return nil, edge.ClientError(http.StatusForbidden, "permission_denied", edge.MsgCannotTransact)
	}
	return &edge.Principal{MerchantID: k.MerchantID, KeyID: k.KeyID, Kind: k.Kind, Permissions: k.Permissions,
		Unrestricted: k.Unrestricted && k.Kind == "secret"}, nil
}

// authSecret requires a secret key (Bearer).
func (s *Server) authSecret(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if e := s.verifyBearer(c); e != nil {
			return e
		}
		return next(c)
	}
}

// verifyBearer authenticates the Authorization header's secret key and records the
// principal on the request.
func (s *Server) verifyBearer(c echo.Context) *edge.Error {
	// A console action reaches the API's own route with its session's principal
	// (edge.WithCaller): the same permission check, idempotency and handler as a
	// Bearer request. Only the console can put it there, in the Go context.
	if p, ok := edge.CallerOf(c.Request().Context()); ok {
		edge.SetPrincipal(c, p)
		return nil
	}
	tok, e := bearer(c.Request())
	if e != nil {
		return e
	}
	p, e := s.auth.verify(c.Request().Context(), tok, "secret")
	if e != nil {
		return e
	}
	edge.SetPrincipal(c, p)
	return nil
}

// authSandboxSecret is authSecret for sandbox-only helpers: they do not exist on a
// live server (404, as for any unknown path).
func (s *Server) authSandboxSecret(next echo.HandlerFunc) echo.HandlerFunc {
	inner := s.authSecret(next)
	return func(c echo.Context) error {
		if s.cfg.Environment != "sandbox" {
			return edge.NotFound("Not found.")
		}
		return inner(c)
	}
}

// authPublicOrSecret accepts a secret key, or a public key alone (the SDK drops its
// Bearer token after some calls). An extra valid credential is never a refusal.
func (s *Server) authPublicOrSecret(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if c.Request().Header.Get("Authorization") != "" {
			if e := s.verifyBearer(c); e != nil {
				return e
			}
			return next(c)
		}
		pk := publicKey(c)
		if pk == "" {
			return unauthorized(msgNoCredentials)
		}
		p, e := s.auth.verify(c.Request().Context(), pk, "public")
		if e != nil {
			return e
		}
		edge.SetPrincipal(c, p)
		return next(c)
	}
}

// authStatus accepts what /payment/status accepts: a secret key, the `signature`
// token returned with a collection (for a browser polling one invoice), or a public
// key alone (the official SDK drops its Bearer token before calling status).
func (s *Server) authStatus(next echo.HandlerFunc) echo.HandlerFunc {
	public := s.authPublicOrSecret(next)
	return func(c echo.Context) error {
		if c.Request().Header.Get("Authorization") == "" {
			b, err := edge.ReadBody(c)
			if err != nil {
				return err
			}
			if sig, err := b.Str("signature", false, 1024, nil); err != nil {
				return err
			} else if sig != "" {
				claims, err := s.verifySignature(c.Request().Context(), sig)
				if errors.Is(err, errBadSignature) {
					return unauthorized("Invalid or expired signature")
				}
				if err != nil {
					return err
				}
				edge.SetPrincipal(c, &edge.Principal{MerchantID: claims.Merchant, Kind: "signature"})
				c.Set(ctxSignature, claims)
				return next(c)
			}
		}
		return public(c)
	}
}

// authCollection is the interface's rule for /payment/collection/: a secret key OR
// the body's public_key, not both; or, from a hosted checkout page, the checkout's
// signature with its checkout_id.
func (s *Server) authCollection(next echo.HandlerFunc) echo.HandlerFunc {
	either := s.authPublicOrSecret(next)
	return func(c echo.Context) error {
		b, err := edge.ReadBody(c)
		if err != nil {
			return err
		}
		if c.Request().Header.Get("Authorization") != "" {
			if b.Has("public_key") {
				return edge.Invalid("public_key", "Use either a secret key (Bearer) or public_key, not both.")
			}
			return either(c)
		}
		if publicKey(c) == "" && b.Has("signature") {
			sig, err := b.Str("signature", true, 1024, nil)
			if err != nil {
				return err
			}
			checkout, err := b.Str("checkout_id", true, 64, nil)
			if err != nil {
				return err
			}
			claims, err := s.verifySignature(c.Request().Context(), sig)
			if errors.Is(err, errBadSignature) || (err == nil && claims.Checkout != checkout) {
				return unauthorized("Invalid or expired signature")
			}
			if err != nil {
				return err
			}
			edge.SetPrincipal(c, &edge.Principal{MerchantID: claims.Merchant, Kind: "signature"})
			c.Set(ctxSignature, claims) // which checkout it opens (prefilledPhone)
			return next(c)
		}
		return either(c)
	}
}

// authPublicOnly is the checkout rule: the public key only. A secret key is refused
// (it must never reach a browser flow); a public key of the other environment is a
// validation error, as the interface says.
func (s *Server) authPublicOnly(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		pk := publicKey(c)
		if pk == "" {
			if c.Request().Header.Get("Authorization") != "" {
				return unauthorized("Use the public key for checkout: a secret key is not accepted here")
			}
			return unauthorized(msgNoCredentials)
		}
		p, e := s.auth.verify(c.Request().Context(), pk, "public")
		if e != nil {
			if e.Detail == msgWrongEnv {
				return edge.Invalid("public_key", "The public key is not valid for this environment.")
			}
			return e
		}
		// The official Python SDK sends its Bearer token on every call, this one too
		// (docs/compat.md). The session is made with the public key alone; the extra secret
		// key is never used, but it must be a valid key of the same merchant, so a
		// request never mixes two merchants' credentials.
		if c.Request().Header.Get("Authorization") != "" {
			if e := s.verifyBearer(c); e != nil {
				return e
			}
			if edge.PrincipalOf(c).MerchantID != p.MerchantID {
				return unauthorized(edge.MsgInvalidToken)
			}
		}
		edge.SetPrincipal(c, p)
		return next(c)
	}
}
