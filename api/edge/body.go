package edge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"paysvc/actors/values/money"
)

// The request's body as read (UnreadBody) and its text check (RawBody), kept so
// every reader of one request (idempotency hashing, the handler) reads it once.
const (
	ctxRawBody  = "paysvc.raw_body"
	ctxBodyText = "paysvc.body_text" // *Error: the body's text check, nil when it passed
)

// Body is a request's JSON object, read field by field so every refusal names its
// field and unknown fields (public_key, which the SDKs inject everywhere) are ignored.
type Body map[string]json.RawMessage

// ReadBody parses the request body as a JSON object. An empty body is an empty
// object: GETs from the official SDK carry stray bytes we never read.
func ReadBody(c echo.Context) (Body, error) {
	raw, err := RawBody(c)
	if err != nil {
		return nil, err
	}
	return ParseBody(raw)
}

// ParseBody parses raw as a JSON object (ReadBody without the text check, for
// publicKey, which must authenticate before the body's fields are judged).
func ParseBody(raw []byte) (Body, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return Body{}, nil
	}
	// Fast path: a body that is exactly one JSON object, as every client sends,
	// decodes with json.Unmarshal, without the Decoder's own buffer and copy
	// (docs/benchmarks-history.md). Anything else (trailing data, a syntax or type
	// error) goes to the Decoder, so what is accepted and refused is unchanged: the Decoder
	// reads only the first value, and when Unmarshal succeeds that value is the
	// whole body.
	var b Body
	if err := json.Unmarshal(raw, &b); err == nil && b != nil {
		return b, nil
	}
	b = nil
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&b); err != nil || b == nil {
		return nil, &Error{Status: 400, Type: "validation_error", Code: "parse_error", Detail: "Request body must be a JSON object."}
	}
	return b, nil
}

// RawBody reads the body once and keeps it for later readers (idempotency hashing
// and the handler both need it). Every string in it is checked (checkJSONText):
// a body carrying a NUL, invalid UTF-8 or an unpaired surrogate in any string is
// refused with 400 naming the field, whoever reads it, so no endpoint, present or
// future, can pass such bytes on to the engine or the database.
func RawBody(c echo.Context) ([]byte, error) {
	raw, err := UnreadBody(c)
	if err != nil {
		return nil, err
	}
	// Checked once per request: auth, idempotency and the handler all read the body.
	if e, ok := c.Get(ctxBodyText).(*Error); ok {
		if e != nil {
			return nil, e
		}
		return raw, nil
	}
	var refused *Error
	if te := checkJSONText(raw); te != nil {
		refused = Invalid(te.path, te.path+": "+string(te.problem))
	}
	c.Set(ctxBodyText, refused)
	if refused != nil {
		return nil, refused
	}
	return raw, nil
}

// UnreadBody reads the body once and keeps it, without judging it.
func UnreadBody(c echo.Context) ([]byte, error) {
	if v, ok := c.Get(ctxRawBody).([]byte); ok {
		return v, nil
	}
	r := c.Request()
	if r.Body == nil {
		return nil, nil
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, ClientError(413, "request_too_large", "Request body is too large.")
		}
		return nil, ClientError(400, "bad_request", "Request body could not be read.")
	}
	c.Set(ctxRawBody, b)
	return b, nil
}

func (b Body) Has(field string) bool {
	v, ok := b[field]
	return ok && string(v) != "null"
}

// str reads a string field. required: missing or empty is an error.
func (b Body) Str(field string, required bool, maxLen int, pattern *regexp.Regexp) (string, error) {
	v, ok := b[field]
	if !ok || string(v) == "null" {
		if required {
			return "", Invalid(field, "This field is required.")
		}
		return "", nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", Invalid(field, "Must be a string.")
	}
	if s == "" && required {
		return "", Invalid(field, "This field may not be blank.")
	}
	if maxLen > 0 && utf8.RuneCountInString(s) > maxLen {
		return "", Invalid(field, fmt.Sprintf("Ensure this field has no more than %d characters.", maxLen))
	}
	if s != "" && pattern != nil && !pattern.MatchString(s) {
		return "", Invalid(field, "Contains characters that are not allowed.")
	}
	return s, nil
}

// boolean reads a JSON boolean (or the strings "true"/"false", which form-minded
// clients send).
func (b Body) Bool(field string, def bool) (bool, error) {
	v, ok := b[field]
	if !ok || string(v) == "null" {
		return def, nil
	}
	var x bool
	if err := json.Unmarshal(v, &x); err == nil {
		return x, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		switch s {
		case "true", "True", "TRUE":
			return true, nil
		case "false", "False", "FALSE":
			return false, nil
		}
	}
	return false, Invalid(field, "Must be a boolean.")
}

// amount reads a money field from a JSON string or number token (never float64).
func (b Body) Amount(field string, required bool) (money.Amount, bool, error) {
	v, ok := b[field]
	if !ok || string(v) == "null" {
		if required {
			return money.Amount{}, false, Invalid(field, "This field is required.")
		}
		return money.Amount{}, false, nil
	}
	var a money.Amount
	if err := a.UnmarshalJSON(v); err != nil {
		return a, false, Invalid(field, "A valid decimal amount with at most 2 decimal places is required.")
	}
	return a, true, nil
}

// text reads a string field that clients may also send as a JSON number (account
// numbers, bank codes, references: the SDKs' own examples send `account: 247247`).
// The number is taken as written, never through a float.
func (b Body) Text(field string, required bool, maxLen int, pattern *regexp.Regexp) (string, error) {
	v, ok := b[field]
	if ok && len(v) > 0 && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) {
		var n json.Number
		if err := json.Unmarshal(v, &n); err != nil {
			return "", Invalid(field, "Must be a string.")
		}
		q, _ := json.Marshal(n.String())
		b[field] = q
	}
	return b.Str(field, required, maxLen, pattern)
}

// integer reads a whole-number field from a JSON integer or a string of digits
// (form-minded clients send "3"), within lo..hi; def when the field is absent or
// null. present reports whether the body carried it.
func (b Body) Int(field string, required bool, def, lo, hi int) (n int, present bool, err error) {
	v, ok := b[field]
	if !ok || string(v) == "null" {
		if required {
			return 0, false, Invalid(field, "This field is required.")
		}
		return def, false, nil
	}
	s := string(v)
	if len(s) > 0 && s[0] == '"' {
		if err := json.Unmarshal(v, &s); err != nil {
			return 0, true, Invalid(field, "A valid integer is required.")
		}
	}
	bad := Invalid(field, fmt.Sprintf("A whole number between %d and %d is required.", lo, hi))
	if s == "" || len(s) > 12 {
		return 0, true, bad
	}
	for i, r := range s {
		if !(r >= '0' && r <= '9' || i == 0 && r == '-' && len(s) > 1) {
			return 0, true, bad
		}
	}
	n, err = strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, true, bad
	}
	return n, true, nil
}
