package edge

import "github.com/labstack/echo/v4"

const ctxRequestID = "request_id"

// RequestID is the request's id (X-Request-Id), which every answer and every log
// line about the request carries.
func RequestID(c echo.Context) string {
	id, _ := c.Get(ctxRequestID).(string)
	return id
}

// SetRequestID records the request's id for RequestID.
func SetRequestID(c echo.Context, id string) { c.Set(ctxRequestID, id) }
