package edge

import (
	"context"
	"slices"

	"github.com/labstack/echo/v4"
)

// Principal is who a request acts for.
type Principal struct {
	MerchantID  string
	KeyID       string
	Kind        string // public, secret or signature
	Permissions []string
	// Unrestricted is the key's own flag (storage.APIKey.Unrestricted): it
	// alone grants every permission. An empty list grants nothing.
	Unrestricted bool
}

// Can reports whether the key holds a permission: an unrestricted key (the
// merchant's main secret key) holds them all, any other only those it lists.
func (p *Principal) Can(perm string) bool {
	return p.Unrestricted || slices.Contains(p.Permissions, perm)
}

const ctxPrincipal = "paysvc.principal"

// PrincipalOf is the request's authenticated principal, nil before
// authentication or on a route that takes no credential.
func PrincipalOf(c echo.Context) *Principal {
	p, _ := c.Get(ctxPrincipal).(*Principal)
	return p
}

// SetPrincipal records who the request acts for, once its credential is checked.
func SetPrincipal(c echo.Context, p *Principal) { c.Set(ctxPrincipal, p) }

// callerKey carries a principal into a route called in-process. A context value:
// no request from outside the process can set it.
type callerKey struct{}

// WithCaller is ctx for a request that the process itself makes on behalf of p
// (a console action calling an API route): the route's secret-key check takes p
// in place of a Bearer key, and everything after it (rate limits, the permission
// check, Idempotency-Key, the handler) runs as for that key.
func WithCaller(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, callerKey{}, p)
}

// CallerOf is the principal WithCaller put in ctx.
func CallerOf(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(callerKey{}).(*Principal)
	return p, ok
}
