package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"paysvc/actors/invoice"
	"paysvc/actors/subscription"
)

// SubscriptionKind is the subscriptions' kind in the batch commit
// (paysvc_apply_subscription, migration 0027).
const SubscriptionKind = "subscription"

// SubscriptionWrites collects the subscriptions a batch changed (the version each
// had when the batch first touched it, and its last state) and the cycle attempts
// it opened. It is the subscriptions' AggregateRows.
type SubscriptionWrites struct {
	prev     map[string]int64
	states   map[string]subscription.State
	order    []string
	attempts []subscriptionAttemptRow
}

// NewSubscriptionWrites returns an empty collector.
func NewSubscriptionWrites() *SubscriptionWrites {
	return &SubscriptionWrites{prev: map[string]int64{}, states: map[string]subscription.State{}}
}

// Touch records a subscription's new state; a cycle attempt it opened (an Attempt
// that the state before did not have) is recorded for the transactions list.
func (w *SubscriptionWrites) Touch(before, after subscription.State) {
	id := after.SubscriptionID
	if _, ok := w.states[id]; !ok {
		w.prev[id] = before.Version
		w.order = append(w.order, id)
	}
	w.states[id] = after
	if a := after.Attempt; a != nil && (before.Attempt == nil || before.Attempt.InvoiceID != a.InvoiceID) {
		w.attempts = append(w.attempts, subscriptionAttemptRow{InvoiceID: a.InvoiceID, SubscriptionID: id,
			MerchantID: after.MerchantID, Slot: a.Slot, CycleDate: a.Date})
	}
}

// Kind implements AggregateRows.
func (w *SubscriptionWrites) Kind() string { return SubscriptionKind }

type subscriptionRow struct {
	SubscriptionID string          `json:"subscription_id"`
	MerchantID     string          `json:"merchant_id"`
	CustomerID     string          `json:"customer_id"`
	PlanID         string          `json:"plan_id"`
	Status         string          `json:"status"`
	NextDate       *string         `json:"next_date"`
	Billing        bool            `json:"billing"`
	TestClockID    string          `json:"test_clock_id"`
	SetupTokenHash string          `json:"setup_token_hash"`
	Version        int64           `json:"version"`
	Prev           int64           `json:"prev"`
	Data           json.RawMessage `json:"data"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
}

type subscriptionAttemptRow struct {
	InvoiceID      string `json:"invoice_id"`
	SubscriptionID string `json:"subscription_id"`
	MerchantID     string `json:"merchant_id"`
	Slot           int    `json:"slot"`
	CycleDate      string `json:"cycle_date"`
}

// Rows implements AggregateRows.
func (w *SubscriptionWrites) Rows() (json.RawMessage, error) {
	if len(w.order) == 0 {
		return nil, nil
	}
	rows := make([]subscriptionRow, len(w.order))
	for i, id := range w.order {
		s := w.states[id]
		data, err := json.Marshal(s)
		if err != nil {
			return nil, fmt.Errorf("subscription %s: %w", id, err)
		}
		var next *string
		if s.NextDate != "" {
			next = &s.NextDate
		}
		rows[i] = subscriptionRow{SubscriptionID: id, MerchantID: s.MerchantID, CustomerID: s.CustomerID, PlanID: s.Plan.PlanID,
			Status: s.Status, NextDate: next, Billing: s.Billing(), TestClockID: s.TestClockID, SetupTokenHash: s.SetupTokenHash,
			Version: s.Version, Prev: w.prev[id], Data: data, CreatedAt: s.CreatedAt.UTC(), UpdatedAt: s.UpdatedAt.UTC()}
	}
	attempts := w.attempts
	if attempts == nil {
		attempts = []subscriptionAttemptRow{}
	}
	return json.Marshal(map[string]any{"subs": rows, "attempts": attempts})
}

func decodeSubscription(d []byte) (subscription.State, error) {
	var s subscription.State
	if err := json.Unmarshal(d, &s); err != nil {
		return s, fmt.Errorf("decode subscription: %w", err)
	}
	return s, nil
}

// GetSubscription reads one of the merchant's subscriptions; another merchant's is
// ErrNotFound.
func GetSubscription(ctx context.Context, q sqlx.QueryerContext, merchantID, id string) (subscription.State, error) {
	var data []byte
	err := sqlx.GetContext(ctx, q, &data, `SELECT data FROM subscriptions WHERE merchant_id = $1 AND subscription_id = $2`, merchantID, id)
	if errors.Is(err, sql.ErrNoRows) {
		return subscription.State{}, ErrNotFound
	}
	if err != nil {
		return subscription.State{}, fmt.Errorf("get subscription: %w", err)
	}
	return decodeSubscription(data)
}

// SubscriptionBySetupToken finds the subscription a setup_url's token opens (by
// the token's hash). The token is the capability: no merchant key is involved.
func SubscriptionBySetupToken(ctx context.Context, q sqlx.QueryerContext, tokenHash string) (subscription.State, error) {
	var data []byte
	err := sqlx.GetContext(ctx, q, &data, `SELECT data FROM subscriptions WHERE setup_token_hash = $1`, tokenHash)
	if errors.Is(err, sql.ErrNoRows) {
		return subscription.State{}, ErrNotFound
	}
	if err != nil {
		return subscription.State{}, fmt.Errorf("subscription by setup token: %w", err)
	}
	return decodeSubscription(data)
}

// LoadSubscriptions reads the snapshots of the given subscriptions of one merchant,
// for the engine to hydrate actors.
func LoadSubscriptions(ctx context.Context, q sqlx.QueryerContext, merchantID string, ids []string) (map[string]subscription.State, error) {
	var rows [][]byte
	if err := sqlx.SelectContext(ctx, q, &rows, `SELECT data FROM subscriptions WHERE merchant_id = $1 AND subscription_id = ANY($2)`,
		merchantID, pq.StringArray(ids)); err != nil {
		return nil, fmt.Errorf("load subscriptions: %w", err)
	}
	out := make(map[string]subscription.State, len(rows))
	for _, d := range rows {
		s, err := decodeSubscription(d)
		if err != nil {
			return nil, err
		}
		out[s.SubscriptionID] = s
	}
	return out, nil
}

// DueCycle is a subscription cycle the scheduler should charge.
type DueCycle struct {
	SubscriptionID string `db:"subscription_id"`
	MerchantID     string `db:"merchant_id"`
	Slot           int    `db:"slot"`
	Date           string `db:"next_date"`
	Generation     int    `db:"generation"`
	TestClockID    string `db:"test_clock_id"`
	// Today is the date the cycle is due by: the wall clock's in EAT, or the test
	// clock's frozen time in EAT.
	Today string `db:"today"`
}

const dueColumns = `s.subscription_id, s.merchant_id, (s.data->>'slot')::int AS slot, to_char(s.next_date, 'YYYY-MM-DD') AS next_date,
	coalesce((s.data->>'generation')::int, 0) AS generation, coalesce(s.test_clock_id, '') AS test_clock_id`

// DueSubscriptions lists cycles due by today (EAT) on the wall clock, after the
// given subscription id (keyset pagination), at most limit. Subscriptions on a test
// clock are not here: see DueOnTestClocks.
func DueSubscriptions(ctx context.Context, q sqlx.QueryerContext, today, after string, limit int) ([]DueCycle, error) {
	var out []DueCycle
	err := sqlx.SelectContext(ctx, q, &out, `SELECT `+dueColumns+`, $1::text AS today FROM subscriptions s
		WHERE s.billing AND s.test_clock_id IS NULL AND s.next_date <= $1::date AND s.subscription_id > $2
		ORDER BY s.subscription_id LIMIT $3`, today, after, limit)
	if err != nil {
		return nil, fmt.Errorf("due subscriptions: %w", err)
	}
	return out, nil
}

// DueOnTestClocks lists cycles due by their test clock's frozen time (in EAT),
// oldest date first, at most limit.
func DueOnTestClocks(ctx context.Context, q sqlx.QueryerContext, limit int) ([]DueCycle, error) {
	var out []DueCycle
	err := sqlx.SelectContext(ctx, q, &out, `SELECT `+dueColumns+`,
		to_char(c.frozen_time AT TIME ZONE 'Africa/Nairobi', 'YYYY-MM-DD') AS today
		FROM subscriptions s JOIN subscription_test_clocks c ON c.clock_id = s.test_clock_id AND c.merchant_id = s.merchant_id
		WHERE s.billing AND s.test_clock_id IS NOT NULL
		AND s.next_date <= (c.frozen_time AT TIME ZONE 'Africa/Nairobi')::date
		ORDER BY s.next_date, s.subscription_id LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("due on test clocks: %w", err)
	}
	return out, nil
}

// SubscriptionPayment is one cycle's charge with its invoice.
type SubscriptionPayment struct {
	Slot      int
	CycleDate string
	Invoice   invoice.State
}

// SubscriptionPayments lists a subscription's cycle charges with their invoices,
// oldest first; another merchant's subscription lists nothing.
func SubscriptionPayments(ctx context.Context, q sqlx.QueryerContext, merchantID, subscriptionID string) ([]SubscriptionPayment, error) {
	var rows []struct {
		Slot      int    `db:"slot"`
		CycleDate string `db:"cycle_date"`
		Data      []byte `db:"data"`
	}
	err := sqlx.SelectContext(ctx, q, &rows, `SELECT si.slot, to_char(si.cycle_date, 'YYYY-MM-DD') AS cycle_date, i.data
		FROM subscription_invoices si JOIN invoices i ON i.invoice_id = si.invoice_id AND i.merchant_id = si.merchant_id
		WHERE si.merchant_id = $1 AND si.subscription_id = $2 ORDER BY si.slot`, merchantID, subscriptionID)
	if err != nil {
		return nil, fmt.Errorf("subscription payments: %w", err)
	}
	out := make([]SubscriptionPayment, len(rows))
	for i, r := range rows {
		out[i] = SubscriptionPayment{Slot: r.Slot, CycleDate: r.CycleDate}
		if err := json.Unmarshal(r.Data, &out[i].Invoice); err != nil {
			return nil, fmt.Errorf("decode invoice: %w", err)
		}
	}
	return out, nil
}

// TestClock is a sandbox clock subscriptions can be attached to.
type TestClock struct {
	ClockID    string    `db:"clock_id"`
	MerchantID string    `db:"merchant_id"`
	Name       string    `db:"name"`
	FrozenTime time.Time `db:"frozen_time"`
	CreatedAt  time.Time `db:"created_at"`
	UpdatedAt  time.Time `db:"updated_at"`
}

// CreateTestClock stores a new clock.
func CreateTestClock(ctx context.Context, q sqlx.ExecerContext, c TestClock) error {
	_, err := q.ExecContext(ctx, `INSERT INTO subscription_test_clocks (clock_id, merchant_id, name, frozen_time, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $5)`, c.ClockID, c.MerchantID, c.Name, c.FrozenTime.UTC(), c.CreatedAt.UTC())
	if err != nil {
		return fmt.Errorf("create test clock: %w", err)
	}
	return nil
}

// GetTestClock reads one of the merchant's clocks; another merchant's is ErrNotFound.
func GetTestClock(ctx context.Context, q sqlx.QueryerContext, merchantID, id string) (TestClock, error) {
	var c TestClock
	err := sqlx.GetContext(ctx, q, &c, `SELECT clock_id, merchant_id, name, frozen_time, created_at, updated_at
		FROM subscription_test_clocks WHERE merchant_id = $1 AND clock_id = $2`, merchantID, id)
	if errors.Is(err, sql.ErrNoRows) {
		return c, ErrNotFound
	}
	return c, err
}

// ErrClockBackwards refuses moving a test clock to an earlier time.
var ErrClockBackwards = errors.New("storage: a test clock only moves forward")

// AdvanceTestClock moves a clock forward to the given time (never back).
func AdvanceTestClock(ctx context.Context, q sqlx.QueryerContext, merchantID, id string, to time.Time) (TestClock, error) {
	var c TestClock
	err := sqlx.GetContext(ctx, q, &c, `UPDATE subscription_test_clocks SET frozen_time = $3, updated_at = now()
		WHERE merchant_id = $1 AND clock_id = $2 AND frozen_time <= $3
		RETURNING clock_id, merchant_id, name, frozen_time, created_at, updated_at`, merchantID, id, to.UTC())
	if errors.Is(err, sql.ErrNoRows) {
		if _, gerr := GetTestClock(ctx, q, merchantID, id); gerr != nil {
			return c, gerr
		}
		return c, ErrClockBackwards
	}
	return c, err
}
