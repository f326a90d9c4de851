package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// SubscriptionKind is the subscriptions' kind in the batch commit
// (storage/functions/paysvc_apply_subscription.sql).
const SubscriptionKind = "subscription"

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
	// The plan's terms now (a plan's amount or currency change applies from the
	// next cycle charged); absent if the plan row is gone.
	PlanName     sql.NullString `db:"plan_name"`
	PlanAmount   sql.NullString `db:"plan_amount"`
	PlanCurrency sql.NullString `db:"plan_currency"`
}

const dueColumns = `s.subscription_id, s.merchant_id, (s.data->>'slot')::int AS slot, to_char(s.next_date, 'YYYY-MM-DD') AS next_date,
	coalesce((s.data->>'generation')::int, 0) AS generation, coalesce(s.test_clock_id, '') AS test_clock_id,
	p.name AS plan_name, p.amount::text AS plan_amount, p.currency AS plan_currency`
const dueFrom = ` FROM subscriptions s LEFT JOIN plans p ON p.plan_id = s.plan_id AND p.merchant_id = s.merchant_id`

// dueMerchant keeps the scheduler to one environment's enabled merchants ($1 is
// the environment): a sandbox scheduler never charges a live merchant's
// subscription, and a disabled merchant's subscriptions are not charged.
const dueMerchant = ` JOIN merchants m ON m.merchant_id = s.merchant_id AND m.environment = $1 AND m.enabled`

// dueOnClock joins each subscription's test clock: due by the clock's frozen time (EAT).
const dueOnClock = ` JOIN subscription_test_clocks c ON c.clock_id = s.test_clock_id AND c.merchant_id = s.merchant_id`
const dueByClock = ` s.billing AND s.test_clock_id IS NOT NULL AND s.next_date <= (c.frozen_time AT TIME ZONE 'Africa/Nairobi')::date`

// DueQuery is one read of the scheduler: one merchant's due cycles, of one
// environment, enabled.
type DueQuery struct {
	Environment string // the scheduler's environment: only its merchants are read
	MerchantID  string
	Today       string // wall clock: cycles due by this date (EAT)
	After       string // wall clock: keyset, after this subscription id
	Limit       int
}

// MerchantsDue lists the enabled merchants of an environment that have wall-clock
// cycles due by today (EAT), so the scheduler can read each one's apart and none
// waits behind another.
func MerchantsDue(ctx context.Context, q sqlx.QueryerContext, environment, today string) ([]string, error) {
	return selectAll[string](ctx, q, "merchants due", `SELECT DISTINCT s.merchant_id FROM subscriptions s`+dueMerchant+`
		WHERE s.billing AND s.test_clock_id IS NULL AND s.next_date <= $2::date ORDER BY 1`, environment, today)
}

// DueSubscriptions lists one merchant's cycles due by q.Today (EAT) on the wall
// clock, after q.After (keyset pagination), at most q.Limit; nothing if the
// merchant is disabled or of another environment. Subscriptions on a test clock
// are not here: see DueOnTestClocks.
func DueSubscriptions(ctx context.Context, db sqlx.QueryerContext, q DueQuery) ([]DueCycle, error) {
	var out []DueCycle
	err := sqlx.SelectContext(ctx, db, &out, `SELECT `+dueColumns+`, $3::text AS today`+dueFrom+dueMerchant+`
		WHERE s.merchant_id = $2 AND s.billing AND s.test_clock_id IS NULL AND s.next_date <= $3::date AND s.subscription_id > $4
		ORDER BY s.subscription_id LIMIT $5`, q.Environment, q.MerchantID, q.Today, q.After, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("due subscriptions: %w", err)
	}
	return out, nil
}

// MerchantsDueOnTestClocks lists the enabled merchants of an environment that
// have cycles due by their test clocks.
func MerchantsDueOnTestClocks(ctx context.Context, q sqlx.QueryerContext, environment string) ([]string, error) {
	return selectAll[string](ctx, q, "merchants due on test clocks", `SELECT DISTINCT s.merchant_id FROM subscriptions s`+dueOnClock+dueMerchant+`
		WHERE`+dueByClock+` ORDER BY 1`, environment)
}

// DueOnTestClocks lists one merchant's cycles due by their test clock's frozen
// time (in EAT), oldest date first, at most q.Limit; nothing if the merchant is
// disabled or of another environment.
func DueOnTestClocks(ctx context.Context, db sqlx.QueryerContext, q DueQuery) ([]DueCycle, error) {
	var out []DueCycle
	err := sqlx.SelectContext(ctx, db, &out, `SELECT `+dueColumns+`,
		to_char(c.frozen_time AT TIME ZONE 'Africa/Nairobi', 'YYYY-MM-DD') AS today`+dueFrom+dueOnClock+dueMerchant+`
		WHERE s.merchant_id = $2 AND`+dueByClock+`
		ORDER BY s.next_date, s.subscription_id LIMIT $3`, q.Environment, q.MerchantID, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("due on test clocks: %w", err)
	}
	return out, nil
}

// CountSubscriptionPayments counts the merchant's recorded cycle charges of a
// status (COMPLETE or FAILED), for checks and the bench.
func CountSubscriptionPayments(ctx context.Context, q sqlx.QueryerContext, status string) (int, error) {
	var n int
	err := sqlx.GetContext(ctx, q, &n, `SELECT count(*) FROM subscription_invoices WHERE status = $1`, status)
	return n, err
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
		return fmt.Errorf("create test clock: %w", idTaken(err, "subscription_test_clocks"))
	}
	return nil
}

// GetTestClock reads one of the merchant's clocks; another merchant's is ErrNotFound.
func GetTestClock(ctx context.Context, q sqlx.QueryerContext, merchantID, id string) (TestClock, error) {
	return getOne[TestClock](ctx, q, `SELECT clock_id, merchant_id, name, frozen_time, created_at, updated_at
		FROM subscription_test_clocks WHERE merchant_id = $1 AND clock_id = $2`, merchantID, id)
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
