package sandbox

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"paysvc/api/edge"
	"paysvc/storage"
)

// Sandbox test clocks (docs/api-decisions.md, "Subscriptions: test clocks"): a
// subscription attached to one is billed by the clock's frozen_time instead of the
// wall clock, so a year of cycles runs in seconds. Not money state: the clock is
// written directly; the subscriptions it drives bill through the engine as any.

type testClockJSON struct {
	TestClockID string    `json:"test_clock_id"`
	Name        string    `json:"name"`
	FrozenTime  time.Time `json:"frozen_time"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

func renderTestClock(c storage.TestClock) testClockJSON {
	return testClockJSON{TestClockID: c.ClockID, Name: c.Name, FrozenTime: c.FrozenTime.UTC(), CreatedAt: c.CreatedAt.UTC(),
		UpdatedAt: c.UpdatedAt.UTC()}
}

// sandboxOnly refuses test clocks on a live server (404 JSON: the resource does
// not exist there), so a live subscription can never be billed early.
func (s *Tools) sandboxOnly() error {
	if s.env != "sandbox" {
		return edge.ClientError(http.StatusNotFound, "not_found", "Test clocks exist only in the sandbox.")
	}
	return nil
}

// The window a test clock's frozen_time must lie in (docs/api-decisions.md,
// "Subscriptions: test clocks"): from 2000-01-01 to five years after the server's
// time. It bounds how many cycles a clock can make fall due (with the retry
// policy and a plan's billing_cycles, how many a subscription on it is charged),
// and five years is a yearly plan's several renewals.
var testClockEarliest = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

const testClockAhead = 5 * 365 * 24 * time.Hour

// readFrozenTime reads an RFC 3339 time or a Unix timestamp (Stripe's form),
// within the test clocks' window.
func readFrozenTime(b edge.Body, field string) (time.Time, error) {
	raw, ok := b[field]
	if !ok || string(raw) == "null" {
		return time.Time{}, edge.Invalid(field, field+" is required.")
	}
	var t time.Time
	// A bare JSON integer is a Unix timestamp; parsed from the raw token.
	if sec, err := strconv.ParseInt(string(raw), 10, 64); err == nil && sec > 0 && sec < 1<<40 {
		t = time.Unix(sec, 0).UTC()
	} else {
		v, err := b.Str(field, true, 40, nil)
		if err != nil {
			return time.Time{}, err
		}
		if t, err = time.Parse(time.RFC3339, v); err != nil {
			return time.Time{}, edge.Invalid(field, field+" must be an RFC 3339 time (2025-01-31T00:00:00+03:00) or a Unix timestamp.")
		}
		t = t.UTC().Truncate(time.Microsecond)
	}
	if latest := time.Now().Add(testClockAhead); t.Before(testClockEarliest) || t.After(latest) {
		return time.Time{}, edge.Invalid(field, field+" must be between 2000-01-01T00:00:00Z and five years from now ("+
			latest.UTC().Format(time.RFC3339)+").")
	}
	return t, nil
}

// readClockBody reads the body of a sandbox-only write to a test clock, and its
// frozen_time.
func (s *Tools) readClockBody(c echo.Context) (edge.Body, time.Time, error) {
	if err := s.sandboxOnly(); err != nil {
		return nil, time.Time{}, err
	}
	b, err := edge.ReadBody(c)
	if err != nil {
		return nil, time.Time{}, err
	}
	at, err := readFrozenTime(b, "frozen_time")
	return b, at, err
}

func (s *Tools) CreateTestClock(c echo.Context) error {
	b, at, err := s.readClockBody(c)
	if err != nil {
		return err
	}
	name, err := b.Str("name", false, 100, nil)
	if err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	tc := storage.TestClock{MerchantID: edge.PrincipalOf(c).MerchantID, Name: name, FrozenTime: at,
		CreatedAt: now, UpdatedAt: now}
	if err := s.redraw(c, "TC", func(id string) error {
		tc.ClockID = id
		return storage.CreateTestClock(c.Request().Context(), s.db, tc)
	}); err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, renderTestClock(tc))
}

func (s *Tools) GetTestClock(c echo.Context) error {
	if err := s.sandboxOnly(); err != nil {
		return err
	}
	tc, err := storage.GetTestClock(c.Request().Context(), s.db, edge.PrincipalOf(c).MerchantID, c.Param("clock_id"))
	if errors.Is(err, storage.ErrNotFound) {
		return edge.NotFound("Test clock not found.")
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, renderTestClock(tc))
}

// AdvanceTestClock moves the clock forward; the scheduler then bills every cycle
// that fell due up to the new time, in date order.
func (s *Tools) AdvanceTestClock(c echo.Context) error {
	_, at, err := s.readClockBody(c)
	if err != nil {
		return err
	}
	tc, err := storage.AdvanceTestClock(c.Request().Context(), s.db, edge.PrincipalOf(c).MerchantID, c.Param("clock_id"), at)
	if errors.Is(err, storage.ErrNotFound) {
		return edge.NotFound("Test clock not found.")
	}
	if errors.Is(err, storage.ErrClockBackwards) {
		return edge.Invalid("frozen_time", "A test clock only moves forward: frozen_time must not be before the clock's time.")
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, renderTestClock(tc))
}
