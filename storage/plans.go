package storage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"paysvc/actors/values/money"
)

// Plan is a subscription plan: what a subscription bills, how often and how many
// times. Not money state: the API writes it directly (migration 0025).
type Plan struct {
	PlanID        string       `db:"plan_id"`
	MerchantID    string       `db:"merchant_id"`
	Name          string       `db:"name"`
	Amount        money.Amount `db:"amount"`
	Currency      string       `db:"currency"`
	Frequency     int          `db:"frequency"`
	FrequencyUnit string       `db:"frequency_unit"`
	BillingCycles int          `db:"billing_cycles"`
	Reference     *string      `db:"reference"`
	RedirectURL   *string      `db:"redirect_url"`
	// Version counts the plan's changes (1 when created); plan_versions keeps the
	// terms of each, so billing can read "the plan as of now" and record it.
	Version   int64     `db:"version"`
	CreatedAt time.Time `db:"created_at"`
	UpdatedAt time.Time `db:"updated_at"`
}

const planColumns = `plan_id, merchant_id, name, amount, currency, frequency, frequency_unit, billing_cycles,
	reference, redirect_url, version, created_at, updated_at`

// PlanOptional is every plan column an upsert may leave out: a plan that exists
// keeps its stored value for each column the request did not carry.
var PlanOptional = []string{"frequency_unit", "billing_cycles", "reference", "redirect_url"}

// ErrFrequencyBound: the plan would have a frequency longer than its unit allows
// (the plans_frequency_bound constraint), so nothing was written.
var ErrFrequencyBound = errors.New("frequency above the bound of the plan's unit")

// UpsertPlan creates the merchant's plan named p.Name with id p.PlanID, or, when
// the merchant already has a plan of that name, updates it and returns it under
// its own id. The required terms (amount, currency, frequency) are always written;
// of PlanOptional only the columns listed in given (p carries the defaults of the
// others, used when the plan is new). The version and updated_at move only when a
// value changed, and each version's terms are recorded in plan_versions in the
// same statement. Concurrent upserts of one name meet on the unique index and
// leave exactly one plan.
func UpsertPlan(ctx context.Context, q sqlx.QueryerContext, p Plan, given []string) (Plan, bool, error) {
	compared := []string{"amount", "currency", "frequency"}
	for _, col := range given {
		if !slices.Contains(PlanOptional, col) {
			return Plan{}, false, fmt.Errorf("upsert plan: unknown column %q", col)
		}
		compared = append(compared, col)
	}
	changed := "(p." + strings.Join(compared, ", p.") + ") IS DISTINCT FROM (EXCLUDED." + strings.Join(compared, ", EXCLUDED.") + ")"
	var set []string
	for _, col := range compared {
		set = append(set, col+" = EXCLUDED."+col)
	}
	query := `WITH up AS (
		INSERT INTO plans AS p (` + planColumns + `)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 1, now(), now())
		ON CONFLICT (merchant_id, name) DO UPDATE SET ` + strings.Join(set, ", ") + `,
			version = CASE WHEN ` + changed + ` THEN p.version + 1 ELSE p.version END,
			updated_at = CASE WHEN ` + changed + ` THEN now() ELSE p.updated_at END
		RETURNING ` + planColumns + `, (xmax = 0) AS created
	), history AS (
		INSERT INTO plan_versions (plan_id, version, amount, currency, frequency, frequency_unit, billing_cycles, valid_from)
		SELECT plan_id, version, amount, currency, frequency, frequency_unit, billing_cycles, updated_at FROM up
		ON CONFLICT (plan_id, version) DO NOTHING
	)
	SELECT * FROM up`
	var row struct {
		Plan
		Created bool `db:"created"`
	}
	err := sqlx.GetContext(ctx, q, &row, query, p.PlanID, p.MerchantID, p.Name, p.Amount, p.Currency, p.Frequency,
		p.FrequencyUnit, p.BillingCycles, p.Reference, p.RedirectURL)
	if breaks(err, "plans_frequency_bound") {
		return Plan{}, false, ErrFrequencyBound
	}
	if err != nil {
		return Plan{}, false, fmt.Errorf("upsert plan: %w", idTaken(err, "plans"))
	}
	return row.Plan, row.Created, nil
}

// GetPlan reads one of the merchant's plans; another merchant's is ErrNotFound.
func GetPlan(ctx context.Context, q sqlx.QueryerContext, merchantID, planID string) (Plan, error) {
	return getOne[Plan](ctx, q, `SELECT `+planColumns+` FROM plans WHERE merchant_id = $1 AND plan_id = $2`, merchantID, planID)
}

// ListPlans returns one page of the merchant's plans, newest first, and the total.
func ListPlans(ctx context.Context, q sqlx.QueryerContext, merchantID string, limit, offset int) ([]Plan, int, error) {
	return offsetPage[Plan](ctx, q, "plans", "plans", planColumns, "created_at DESC, plan_id DESC", merchantID, limit, offset)
}

// PlanVersion is the terms of one version of a plan and when they began to apply.
type PlanVersion struct {
	PlanID        string       `db:"plan_id"`
	Version       int64        `db:"version"`
	Amount        money.Amount `db:"amount"`
	Currency      string       `db:"currency"`
	Frequency     int          `db:"frequency"`
	FrequencyUnit string       `db:"frequency_unit"`
	BillingCycles int          `db:"billing_cycles"`
	ValidFrom     time.Time    `db:"valid_from"`
}

// PlanVersions lists the terms of every version of one of the merchant's plans,
// oldest first (another merchant's plan has none).
func PlanVersions(ctx context.Context, q sqlx.QueryerContext, merchantID, planID string) ([]PlanVersion, error) {
	out := []PlanVersion{}
	err := sqlx.SelectContext(ctx, q, &out, `SELECT v.plan_id, v.version, v.amount, v.currency, v.frequency,
		v.frequency_unit, v.billing_cycles, v.valid_from
		FROM plan_versions v JOIN plans p USING (plan_id) WHERE p.merchant_id = $1 AND v.plan_id = $2
		ORDER BY v.version`, merchantID, planID)
	if err != nil {
		return nil, fmt.Errorf("plan versions: %w", err)
	}
	return out, nil
}

// PlanByID reads a plan by its id alone, for the public subscribe page: the id is
// random (60 bits) and the page that names it is the merchant's to share, so the
// plan's merchant is whoever owns it. Every other read is scoped by merchant.
func PlanByID(ctx context.Context, q sqlx.QueryerContext, planID string) (Plan, error) {
	return getOne[Plan](ctx, q, `SELECT `+planColumns+` FROM plans WHERE plan_id = $1`, planID)
}
