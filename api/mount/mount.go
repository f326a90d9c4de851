package mount

import (
	"context"
	"fmt"
)

// Mount declares one kind's routes. Paths are under /api/v1 (a kind cannot shadow
// the hosted pages or another version's paths) and use Echo's :param syntax. A
// route whose method and path the API already serves, an unknown permission or an
// empty What is a programming error of the list: the API panics when it is built.
type Mount interface {
	// Command serves method path by issuing one command of the kind per request:
	// decode turns the authenticated request into the command (or refuses it with
	// Invalid / NotFound, nothing issued). The route honours Idempotency-Key (a
	// replay answers the first reply and applies nothing), waits for the engine's
	// reply and answers its Result with Command.Status, or its refusal mapped to
	// HTTP (the API's codes and the kind's Refusals).
	Command(method, path string, a Access, decode func(Request) (Command, error))
	// Get serves GET path with the state of the kind's instance named by the path
	// parameter param, read with the kind's own Load for the authenticated
	// merchant: another merchant's instance is 404 exactly like a missing one.
	// view turns the stored state into the response body.
	Get(path string, a Access, param string, view func(state any) any)
	// Refusals maps the kind's own reply codes (engine.Refuse) to HTTP statuses;
	// the generic codes (invalid, not_found, ...) are mapped already. A code
	// mapped nowhere answers the generic 500, never the engine's detail.
	Refusals(codes map[string]int)
}

// Access is who may call a mounted route: a secret key, and for a restricted key
// the Permission (a name of the API's catalogue, api.Permissions). What is the
// action, for the 403 that names the missing permission.
type Access struct {
	Permission string
	What       string
}

// Command is what one request issues.
type Command struct {
	Type    string // one of the kind's engine.Kind.Commands
	Payload any    // encoded as the command's JSON payload
	Status  int    // the success status (http.StatusCreated on create); 0: 200
}

// Request is one authenticated, permitted call of a mounted route.
type Request interface {
	Context() context.Context
	// MerchantID is the authenticated merchant's: the command is issued for it,
	// and a decode that reads anything must read it for this merchant alone.
	MerchantID() string
	// Param is a path parameter.
	Param(name string) string
	// Decode decodes the JSON body (already checked for NUL and invalid UTF-8)
	// into v; a body that is not a JSON object of v's shape is the API's 400.
	Decode(v any) error
}

// Invalid refuses a request with 400 validation_error naming the field (Attr).
type Invalid struct{ Attr, Detail string }

func (e *Invalid) Error() string { return fmt.Sprintf("%s: %s", e.Attr, e.Detail) }

// NotFound refuses a request with 404 not_found (what the path names does not
// exist for this merchant).
type NotFound struct{ Detail string }

func (e *NotFound) Error() string { return e.Detail }
