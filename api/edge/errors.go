package edge

import (
	"fmt"
	"net/http"
)

// Error is a refusal the client can act on. Its text is always safe to show: an
// unknown error never becomes one, except as ErrInternal.
type Error struct {
	Status int
	Type   string // client_error, validation_error, server_error
	Code   string
	Detail string
	Attr   string
	// RetryAfter, when set, becomes a Retry-After header (seconds).
	RetryAfter int
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Detail) }

// ClientError is a refusal of the request as the client made it.
func ClientError(status int, code, detail string) *Error {
	return &Error{Status: status, Type: "client_error", Code: code, Detail: detail}
}

// Invalid is a 400 naming the field (attr) at fault.
func Invalid(attr, detail string) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "validation_error", Code: "invalid", Detail: detail, Attr: attr}
}

// NotFound is a 404.
func NotFound(detail string) *Error {
	return ClientError(http.StatusNotFound, "not_found", detail)
}

// ErrInternal is the one answer to an error that is not an *Error: "internal
// error" and the request id, never the error's own text.
var ErrInternal = &Error{Status: http.StatusInternalServerError, Type: "server_error", Code: "error", Detail: "internal error"}

// Unavailable is a 503 for a dependency that could not be reached: the request
// changed nothing and may be retried as it was.
func Unavailable() *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "unavailable",
		Detail: "The service is temporarily unavailable; retry with the same Idempotency-Key.", RetryAfter: 1}
}

// Two of the interface's messages, word for word, that the console shows too.
const (
	MsgInvalidToken   = "Invalid api token"
	MsgCannotTransact = "Your account cannot transact. Contact support to enable it."
)
