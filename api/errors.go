package api

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/lib/pq"

	"github.com/labstack/echo/v4"

	"paysvc/api/edge"
)

// errorItem and errorBody are the one error shape: `detail` for clients of the
// public service, `type`/`errors[]` for newer clients, `request_id` for support.
type errorItem struct {
	Code   string  `json:"code"`
	Detail string  `json:"detail"`
	Attr   *string `json:"attr"`
}

type errorBody struct {
	Type      string      `json:"type"`
	Detail    string      `json:"detail"`
	Errors    []errorItem `json:"errors"`
	RequestID string      `json:"request_id"`
}

func (s *Server) renderError(c echo.Context, e *edge.Error) error {
	item := errorItem{Code: e.Code, Detail: e.Detail}
	if e.Attr != "" {
		a := e.Attr
		item.Attr = &a
	}
	if e.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", fmt.Sprint(e.RetryAfter))
	}
	return c.JSON(e.Status, errorBody{Type: e.Type, Detail: e.Detail, Errors: []errorItem{item}, RequestID: edge.RequestID(c)})
}

// handleError is Echo's error handler: every error leaves as the JSON shape above
// (to a browser on a customer's page, as a page: pages.ErrorPage); an error we
// did not make is logged in full and shown only as "internal error".
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var ae *edge.Error
	var he *echo.HTTPError
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &he):
		ae = fromEcho(he)
	case badInputBytes(err):
		// The database refused a value the edge let through (bytes it cannot store, a
		// number out of range): the request's fault, so a 400, but a gap in the edge's
		// checks, so logged. The driver's text may quote the value and is never shown.
		s.log.Warn("database refused request data", "request_id", edge.RequestID(c), "route", c.Path(), "err", err)
		ae = &edge.Error{Status: http.StatusBadRequest, Type: "validation_error", Code: "invalid",
			Detail: "The request contains a value that cannot be stored (bad characters or out of range)."}
	case dependencyDown(err):
		s.log.Warn("dependency unavailable", "request_id", edge.RequestID(c), "route", c.Path(), "err", err)
		ae = edge.Unavailable()
	default:
		s.log.Error("unhandled error", "request_id", edge.RequestID(c), "route", c.Path(), "err", err)
		ae = edge.ErrInternal
	}
	if ae.Status >= 500 && ae != edge.ErrInternal {
		s.log.Warn("server refusal", "request_id", edge.RequestID(c), "route", c.Path(), "code", ae.Code)
	}
	if s.pages.ErrorPage(c, ae) {
		return // a customer's browser on a hosted page reads a page (api/pages)
	}
	if err := s.renderError(c, ae); err != nil {
		s.log.Warn("write error response", "err", err)
	}
}

func fromEcho(he *echo.HTTPError) *edge.Error {
	switch he.Code {
	case http.StatusNotFound:
		return edge.NotFound("Not found.")
	case http.StatusMethodNotAllowed:
		return edge.ClientError(he.Code, "method_not_allowed", "Method not allowed.")
	case http.StatusRequestEntityTooLarge:
		return edge.ClientError(he.Code, "request_too_large", "Request body is too large.")
	case http.StatusUnsupportedMediaType:
		return edge.ClientError(he.Code, "unsupported_media_type", "Request body must be JSON.")
	case http.StatusTooManyRequests:
		return &edge.Error{Status: he.Code, Type: "client_error", Code: "throttled", Detail: "Request was throttled.", RetryAfter: 1}
	}
	if he.Code >= 400 && he.Code < 500 {
		return edge.ClientError(he.Code, "error", http.StatusText(he.Code)+".")
	}
	return edge.ErrInternal
}

// badInputBytes reports a PostgreSQL data exception (SQLSTATE class 22: invalid
// byte sequence 22021, untranslatable character 22P05, numeric out of range 22003,
// invalid text representation 22P02, ...): the value sent was bad, not the service.
func badInputBytes(err error) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && pqErr.Code.Class() == "22"
}

// dependencyDown reports errors that mean the database could not be reached or
// dropped the connection: the request changed nothing and may be retried, so it is
// a 503 with Retry-After rather than an internal error.
func dependencyDown(err error) bool {
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, sql.ErrConnDone) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		switch pqErr.Code.Class() {
		case "08", "57", "53": // connection exception, operator intervention, insufficient resources
			return true
		}
	}
	var netErr net.Error
	return errors.As(err, &netErr)
}
