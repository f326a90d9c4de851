package api

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"

	"paysvc/api/edge"
)

// routeKind is who may call a route and how they prove it.
type routeKind int

const (
	// kindSecret: a secret key; a restricted key needs the route's permission.
	kindSecret routeKind = iota + 1
	// kindPublicOrSecret: a secret key (with the permission) or the public key.
	kindPublicOrSecret
	// kindCollection: a secret key (with the permission), the public key, or a
	// hosted checkout's signature (the interface's rule for /payment/collection/).
	kindCollection
	// kindStatus: a secret key (with the permission), the public key, or the
	// signature returned with one collection.
	kindStatus
	// kindPublicKey: the public key only (checkout creation).
	kindPublicKey
	// kindSandbox: sandbox tooling; exists only on a sandbox server and needs the
	// merchant's unrestricted secret key (it mints test money and streams every event).
	kindSandbox
	// kindCallback: a payment provider's callback, authenticated by the secret
	// token in its path (Daraja cannot present a key).
	kindCallback
	// kindOpen: no credential (the checkout page, bank codes, health).
	kindOpen
	// kindConsole: a merchant console page or form, with the session cookie that a
	// secret key became at sign-in (api/console, session.go); the page's own need is
	// checked by the console, and every action by the API route it calls.
	kindConsole
)

var kindNames = map[routeKind]string{
	kindSecret: "secret key", kindPublicOrSecret: "secret or public key",
	kindCollection: "secret key, public key or checkout signature", kindStatus: "secret key, public key or collection signature",
	kindPublicKey: "public key only", kindSandbox: "sandbox tooling (unrestricted secret key)",
	kindCallback: "provider callback (path token)", kindOpen: "public (no credential)",
	kindConsole: "console session (cookie from a secret key)",
}

// access is what a route declares about its callers; every route has one (routes()
// registers through handle, and TestEveryRouteDeclaresAccess walks the router).
type access struct {
	kind routeKind
	perm string // what a restricted secret key needs; empty only where no secret key is accepted
	// idempotent routes honour Idempotency-Key.
	idempotent bool
	// cardBody: the body carries card data, which the Idempotency-Key record
	// must not fingerprint (idempotency.go).
	cardBody bool
	// extra is a second permission a request needs because of what its body asks
	// (empty: none); what says why, for the 403.
	extra func(c echo.Context) (perm, what string)
	what  string // the action, for the 403 message
	// capability is what an open route's path names (capability.go): the route is
	// refused with its 404 unless the capability's merchant may be served here.
	capability *capability
}

func secret(perm, what string) access { return access{kind: kindSecret, perm: perm, what: what} }

func (a access) idem() access { a.idempotent = true; return a }

// opens declares an open route whose path names a capability.
func opens(cp *capability) access { return access{kind: kindOpen, capability: cp} }

// Route is one registered route and its declared access, for tests and docs.
type Route struct {
	Method, Path string
	Access       string // who may call it
	Permission   string // what a restricted secret key needs ("" if none accepted)
}

// Routes lists every route the API serves with its declared access.
func (s *Server) Routes() []Route {
	out := make([]Route, 0, len(s.declared))
	for k, a := range s.declared {
		method, path, _ := strings.Cut(k, " ")
		out = append(out, Route{Method: method, Path: path, Access: kindNames[a.kind], Permission: a.perm})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Method < out[j].Method
	})
	return out
}

// handle registers a route with its declared access: the credential check, the rate
// limits, the permission check and Idempotency-Key, in that order, all derived from
// the declaration so no route can leave one out.
func (s *Server) handle(e *echo.Echo, method, path string, h echo.HandlerFunc, a access) {
	if a.kind == 0 {
		panic("api: route " + method + " " + path + " declares no access")
	}
	secretAccepted := a.kind == kindSecret || a.kind == kindPublicOrSecret || a.kind == kindCollection || a.kind == kindStatus
	if secretAccepted != (a.perm != "") {
		panic("api: route " + method + " " + path + ": a permission is declared exactly where secret keys are accepted")
	}
	if a.capability != nil && a.kind != kindOpen {
		panic("api: route " + method + " " + path + ": only an open route names a capability in its path")
	}
	var mw []echo.MiddlewareFunc
	switch a.kind {
	case kindOpen:
		mw = []echo.MiddlewareFunc{s.limitOpen}
		if a.capability != nil {
			// After the address limit: finding the capability reads the database.
			mw = append(mw, s.bindCapability(a.capability))
		}
	case kindCallback:
		mw = []echo.MiddlewareFunc{s.limitCallback}
	case kindConsole:
		mw = []echo.MiddlewareFunc{s.limitBeforeAuth, s.console.Authenticate, s.limitPrincipal}
	default:
		auth := map[routeKind]echo.MiddlewareFunc{kindSecret: s.authSecret, kindPublicOrSecret: s.authPublicOrSecret,
			kindCollection: s.authCollection, kindStatus: s.authStatus, kindPublicKey: s.authPublicOnly,
			kindSandbox: s.authSandboxSecret}[a.kind]
		mw = []echo.MiddlewareFunc{s.limitBeforeAuth, auth, s.limitPrincipal, s.permit(a)}
	}
	if a.idempotent {
		mw = append(mw, s.idempotent(a.cardBody))
	}
	e.Add(method, path, h, mw...)
	s.declared[method+" "+path] = a
}

// permit refuses a restricted secret key that lacks the route's permission, with a
// 403 naming it. Public keys and signatures reach only the routes whose credential
// check admits them, so only secret keys carry permissions.
func (s *Server) permit(a access) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			p := edge.PrincipalOf(c)
			if p == nil || p.Kind != "secret" {
				return next(c)
			}
			if a.kind == kindSandbox {
				if !p.Unrestricted {
					return edge.ClientError(http.StatusForbidden, "permission_denied",
						"Sandbox tools need the merchant's unrestricted secret key; this API key is restricted.")
				}
				return next(c)
			}
			if !p.Can(a.perm) {
				return permissionDenied(a.perm, a.what)
			}
			if a.extra != nil && !p.Unrestricted { // a full key holds every extra too: skip the body parse
				if perm, what := a.extra(c); perm != "" && !p.Can(perm) {
					return permissionDenied(perm, what)
				}
			}
			return next(c)
		}
	}
}

func permissionDenied(perm, what string) *edge.Error {
	return &edge.Error{Status: http.StatusForbidden, Type: "client_error", Code: "permission_denied",
		Detail: fmt.Sprintf("This API key does not have the %s permission, which is required to %s.", perm, what)}
}

// approvalRequested: initiation with requires_approval NO approves the file in the
// same command, so it needs approve_files too. A body the handler will refuse
// anyway asks for nothing here.
func approvalRequested(c echo.Context) (string, string) {
	b, err := edge.ReadBody(c)
	if err != nil {
		return "", ""
	}
	if v, err := b.Str("requires_approval", false, 3, nil); err == nil && strings.EqualFold(v, "NO") {
		return edge.PermApproveFiles, `initiate a payment file with requires_approval "NO", which approves it`
	}
	return "", ""
}
