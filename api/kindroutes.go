package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"

	"paysvc/actors/engine"
	"paysvc/api/mount"
	"paysvc/topics"
)

// An aggregate's own routes (api/mount, docs/adr/0007-one-aggregate-contract.md):
// a kind of the service's one list may bring routes, which are mounted here
// through the same route table as the built-in ones (handle: credential, rate
// limits, permission, Idempotency-Key), so they are in Echo's route table, the
// OpenAPI description and the drift tests like any other. Adding such a kind
// changes nothing in this package.

// KindRoutes is one aggregate's routes as the service's list gives them.
type KindRoutes struct {
	// Name is the kind's (engine.Kind.Name), for the messages of a badly declared route.
	Name string
	// Load is the kind's engine.Kind.Load: a mounted Get reads the merchant's
	// stored instance with it.
	Load func(ctx context.Context, q sqlx.QueryerContext, merchantID string, ids []string) ([]engine.Snapshot, error)
	// Routes declares the routes.
	Routes func(mount.Mount)
}

// kindPrefix is where every mounted route lives: a kind cannot shadow the hosted
// pages, the callbacks or another version's paths.
const kindPrefix = "/api/v1"

// mountKinds mounts every kind's routes, after the built-in ones so that a kind
// claiming a built-in route is refused rather than silently replacing it.
func (s *Server) mountKinds(e *echo.Echo) {
	for _, k := range s.kinds {
		if k.Routes != nil {
			k.Routes(&kindMount{s: s, e: e, k: k, codes: map[string]int{}})
		}
	}
}

// kindMount is the API's mount.Mount for one kind.
type kindMount struct {
	s     *Server
	e     *echo.Echo
	k     KindRoutes
	codes map[string]int // the kind's own reply codes (Refusals)
}

// declare checks a route the kind declares and returns its full path and access.
// A bad declaration is a programming error of the service's list: it panics
// when the server is built, as handle does.
func (m *kindMount) declare(method, path string, a mount.Access) (string, access) {
	full := kindPrefix + path
	switch {
	case !strings.HasPrefix(path, "/") || strings.HasSuffix(path, "/"):
		panic(fmt.Sprintf("api: kind %s: route %s %s: a path starts with / and does not end with one", m.k.Name, method, path))
	case m.s.declared[method+" "+full].kind != 0:
		panic(fmt.Sprintf("api: kind %s: route %s %s is served already", m.k.Name, method, full))
	case !KnownPermission(a.Permission) || a.What == "":
		panic(fmt.Sprintf("api: kind %s: route %s %s needs a permission of the catalogue (api.Permissions) and what it is for", m.k.Name, method, full))
	}
	return full, secret(a.Permission, a.What)
}

// Command implements mount.Mount.
func (m *kindMount) Command(method, path string, a mount.Access, decode func(mount.Request) (mount.Command, error)) {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		panic(fmt.Sprintf("api: kind %s: a command route is POST, PUT, PATCH or DELETE, not %s", m.k.Name, method))
	}
	full, acc := m.declare(method, path, a)
	m.s.handle(m.e, method, full, func(c echo.Context) error {
		cmd, err := decode(kindRequest{c})
		if err != nil {
			return kindError(err)
		}
		// The same path as every built-in command: the id from Idempotency-Key,
		// the reply wait, the stored reply after a timeout (commands.go).
		r, err := m.s.issue(c, cmd.Type, cmd.Payload)
		if err != nil {
			return err
		}
		if r.Error != nil {
			return m.refusal(r.Error)
		}
		status := cmd.Status
		if status == 0 {
			status = http.StatusOK
		}
		if len(r.Result) == 0 {
			return c.JSON(status, struct{}{})
		}
		return c.JSONBlob(status, r.Result)
	}, acc.idem())
}

// Get implements mount.Mount.
func (m *kindMount) Get(path string, a mount.Access, param string, view func(state any) any) {
	if m.k.Load == nil {
		panic(fmt.Sprintf("api: kind %s: a Get needs the kind's Load", m.k.Name))
	}
	if !strings.Contains(path+"/", "/:"+param+"/") {
		panic(fmt.Sprintf("api: kind %s: route GET %s has no path parameter %q", m.k.Name, path, param))
	}
	full, acc := m.declare(http.MethodGet, path, a)
	m.s.handle(m.e, http.MethodGet, full, func(c echo.Context) error {
		id := c.Param(param)
		if id == "" || len(id) > 128 {
			return notFound("Not found.")
		}
		// The kind's Load reads the authenticated merchant's instances only:
		// another merchant's is absent, hence the same 404 as a missing one.
		snaps, err := m.k.Load(c.Request().Context(), m.s.db, principal(c).MerchantID, []string{id})
		if err != nil {
			return err
		}
		for _, sn := range snaps {
			if sn.ID == id {
				return c.JSON(http.StatusOK, view(sn.State))
			}
		}
		return notFound("Not found.")
	}, acc)
}

// Refusals implements mount.Mount. A kind's code is a client's refusal (4xx),
// and a code the API maps already keeps its status.
func (m *kindMount) Refusals(codes map[string]int) {
	for code, status := range codes {
		if status < 400 || status > 499 {
			panic(fmt.Sprintf("api: kind %s: reply code %q maps to %d: a refusal is a 4xx", m.k.Name, code, status))
		}
		if have, ok := replyStatus[code]; ok && have != status {
			panic(fmt.Sprintf("api: kind %s: reply code %q is the API's already (%d)", m.k.Name, code, have))
		}
		m.codes[code] = status
	}
}

// refusal maps a reply error with the kind's codes first, then the API's.
func (m *kindMount) refusal(re *topics.ReplyError) *Error {
	status, ok := m.codes[re.Code]
	if !ok {
		return refusal(re)
	}
	typ := "client_error"
	if status == http.StatusBadRequest {
		typ = "validation_error"
	}
	return &Error{Status: status, Type: typ, Code: re.Code, Detail: re.Detail, Attr: re.Attr}
}

// kindError turns what a kind's decode refused with into the API's error; any
// other error is the API's 500 (its text is never shown).
func kindError(err error) error {
	var inv *mount.Invalid
	var nf *mount.NotFound
	switch {
	case errors.As(err, &inv):
		return invalid(inv.Attr, inv.Detail)
	case errors.As(err, &nf):
		return notFound(nf.Detail)
	}
	return err
}

// kindRequest is the API's mount.Request.
type kindRequest struct{ c echo.Context }

func (r kindRequest) Context() context.Context { return r.c.Request().Context() }
func (r kindRequest) MerchantID() string       { return principal(r.c).MerchantID }
func (r kindRequest) Param(name string) string { return r.c.Param(name) }

// Decode reads the body as every route does (rawBody: its text checked once) and
// decodes it into v. An empty body is an empty object, as readBody has it.
func (r kindRequest) Decode(v any) error {
	raw, err := rawBody(r.c)
	if err != nil {
		return err
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	if raw[0] != '{' {
		return &Error{Status: http.StatusBadRequest, Type: "validation_error", Code: "parse_error", Detail: "Request body must be a JSON object."}
	}
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return invalid(te.Field, "Has the wrong type.")
		}
		return &Error{Status: http.StatusBadRequest, Type: "validation_error", Code: "parse_error", Detail: "Request body is not valid for this route."}
	}
	return nil
}
