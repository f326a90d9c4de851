package bench

import (
	"context"
	"fmt"
	"time"

	"paysvc/actors/aggregates/subscription"
	"paysvc/actors/aggregates/wallet/walletstore"
	"paysvc/cmd/paysvc/admin"
	"paysvc/storage"
)

// The billing-run scenario (`make bench BENCHFLAGS="--scenario billing-run"`):
// Subscriptions ACTIVE subscriptions, spread over billingMerchants merchants, are
// seeded directly in the bench database with a due next_date but not yet marked
// billing; one UPDATE then makes all of them due at the same instant, and the
// service's own scheduler (PAYSVC_SUBSCRIPTION_TICK) bills them through the engine,
// one command per cycle. The run waits until every cycle is recorded, prints the
// elapsed time and the billed count (which must equal the seeded count exactly),
// and checks the ledger and the settlement balances.

const (
	billingMerchants = 16
	billingAmount    = "1000.00" // KES per cycle; the card fee is 3.5% (BUSINESS-PAYS)
	billingNet       = "965.00"
	billingTarget    = 60 * time.Second
	billingMax       = 10 * time.Minute
)

type billingResult struct {
	Seeded, Billed, Failed int
	Took                   time.Duration
	LedgerOK, BalancesOK   bool
}

func (r *runner) runBilling(ctx context.Context) (*billingResult, error) {
	n := r.o.Subscriptions
	res := &billingResult{Seeded: n}
	seedStart := time.Now()
	merchants, err := r.seedBilling(ctx, n)
	if err != nil {
		return nil, err
	}
	if _, err := r.db.ExecContext(ctx, `ANALYZE subscriptions`); err != nil {
		return nil, err
	}
	r.printf("billing-run: seeded %d ACTIVE subscriptions over %d merchants in %s\n", n, len(merchants),
		time.Since(seedStart).Round(time.Millisecond))

	// All due at one instant.
	start := time.Now()
	if _, err := r.db.ExecContext(ctx, `UPDATE subscriptions SET billing = true WHERE subscription_id LIKE 'SUBB' || $1 || '%'`, r.runID); err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	deadline := start.Add(billingMax)
	lastPrint := start
	for {
		if err := r.db.GetContext(ctx, &res.Billed, `SELECT count(*) FROM subscription_invoices`); err != nil {
			return nil, err
		}
		if res.Billed >= n || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		if r.o.Progress && time.Since(lastPrint) >= time.Second {
			lastPrint = time.Now()
			r.printf("billing-run: %d billed after %s\n", res.Billed, time.Since(start).Round(time.Second))
		}
		time.Sleep(50 * time.Millisecond)
	}
	res.Took = time.Since(start)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	// Let any duplicate the engine might (wrongly) apply show up before counting.
	time.Sleep(2 * time.Second)
	if err := r.db.GetContext(ctx, &res.Billed, `SELECT count(*) FROM subscription_invoices`); err != nil {
		return nil, err
	}
	if err := r.db.GetContext(ctx, &res.Failed, `SELECT count(*) FROM subscription_invoices WHERE status <> 'COMPLETE'`); err != nil {
		return nil, err
	}
	var cycles, credits int
	if err := r.db.GetContext(ctx, &cycles, `SELECT coalesce(sum((data->>'completed_cycles')::int), 0) FROM subscriptions
		WHERE subscription_id LIKE 'SUBB' || $1 || '%'`, r.runID); err != nil {
		return nil, err
	}
	if err := r.db.GetContext(ctx, &credits, `SELECT count(*) FROM ledger_entries WHERE wallet_id IS NOT NULL AND trans_type = 'SALE'
		AND merchant_id = ANY(SELECT merchant_id FROM merchants WHERE name LIKE 'bench billing %')`); err != nil {
		return nil, err
	}
	rep, err := storage.CheckLedger(ctx, r.db)
	if err != nil {
		return nil, err
	}
	res.LedgerOK = rep.OK
	var bad int
	if err := r.db.GetContext(ctx, &bad, `SELECT count(*) FROM wallets w WHERE w.merchant_id = ANY(SELECT merchant_id FROM merchants
		WHERE name LIKE 'bench billing %') AND w.wallet_type = 'SETTLEMENT' AND w.current_balance <> $1::numeric * (SELECT count(*)
		FROM subscription_invoices si WHERE si.merchant_id = w.merchant_id AND si.status = 'COMPLETE')`, billingNet); err != nil {
		return nil, err
	}
	res.BalancesOK = bad == 0
	rate := float64(res.Billed) / res.Took.Seconds()
	r.printf("billing-run: %d of %d cycles billed in %s (%.0f cycles/s); %d failed; completed_cycles sum %d; wallet credits %d\n",
		res.Billed, n, res.Took.Round(time.Millisecond), rate, res.Failed, cycles, credits)
	r.printf("billing-run: ledger check %s; settlement balances = billed x %s: %s\n", okText(res.LedgerOK), billingNet, okText(res.BalancesOK))
	verdict := "met"
	if res.Took > billingTarget {
		verdict = "MISSED"
	}
	r.printf("billing-run: target <= %s for %d cycles: %s\n", billingTarget, n, verdict)
	if res.Billed != n || cycles != n || credits != n || res.Failed != 0 || !res.LedgerOK || !res.BalancesOK {
		return res, fmt.Errorf("billing-run: billed %d, completed %d, credits %d, failed %d of %d seeded; ledger %s, balances %s",
			res.Billed, cycles, credits, res.Failed, n, okText(res.LedgerOK), okText(res.BalancesOK))
	}
	return res, nil
}

// seedBilling writes n ACTIVE subscriptions, due today with a card set up, over
// billingMerchants new merchants, straight into the tables (no API: the run
// measures the billing, not the seeding); it returns the merchants.
func (r *runner) seedBilling(ctx context.Context, n int) ([]string, error) {
	today := subscription.Today(time.Now())
	per := (n + billingMerchants - 1) / billingMerchants
	left := n
	var merchants []string
	for i := 0; left > 0; i++ {
		k := min(per, left)
		left -= k
		c, err := admin.CreateMerchant(ctx, r.db, fmt.Sprintf("bench billing %d", i+1), "sandbox")
		if err != nil {
			return nil, fmt.Errorf("create merchant: %w", err)
		}
		merchants = append(merchants, c.MerchantID)
		w, err := walletstore.Settlement(ctx, r.db, c.MerchantID, "KES")
		if err != nil {
			return nil, err
		}
		planID, custID := fmt.Sprintf("BP%s%02d", r.runID, i), fmt.Sprintf("BC%s%02d", r.runID, i)
		now := time.Now().UTC()
		if _, err := r.db.ExecContext(ctx, `INSERT INTO plans (plan_id, merchant_id, name, amount, currency, frequency, frequency_unit,
			billing_cycles, version, created_at, updated_at) VALUES ($1, $2, 'Bench', $3, 'KES', 1, 'M', 12, 1, $4, $4)`,
			planID, c.MerchantID, billingAmount, now); err != nil {
			return nil, fmt.Errorf("seed plan: %w", err)
		}
		if _, err := r.db.ExecContext(ctx, `INSERT INTO customers (customer_id, merchant_id, email, first_name, last_name, version,
			created_at, updated_at) VALUES ($1, $2, 'bench@example.com', 'Bench', 'Customer', 1, $3, $3)`, custID, c.MerchantID, now); err != nil {
			return nil, fmt.Errorf("seed customer: %w", err)
		}
		// The state is actors/aggregates/subscription.State as the engine stores it (ACTIVE,
		// card set up, first cycle due today); billing stays false until the start.
		if _, err := r.db.ExecContext(ctx, `INSERT INTO subscriptions (subscription_id, merchant_id, customer_id, plan_id, status,
			next_date, billing, test_clock_id, setup_token_hash, version, data, created_at, updated_at)
			SELECT id, $1, $2, $3, 'ACTIVE', $4::date, false, NULL, NULL, 2, jsonb_build_object(
				'subscription_id', id, 'merchant_id', $1::text, 'customer_id', $2::text,
				'plan', jsonb_build_object('plan_id', $3::text, 'frequency', 1, 'frequency_unit', 'M', 'billing_cycles', 12),
				'status', 'ACTIVE', 'start_date', $4::text, 'next_date', $4::text, 'anchor', $4::text, 'anchor_slot', 0, 'slot', 0,
				'generation', 0, 'completed_cycles', 0, 'card_token', 'ctok_bench_' || id, 'card_network', 'VISA',
				'card_number', '424242******4242', 'card_outcome', 'success', 'wallet_id', $5::text,
				'terms', jsonb_build_object('name', 'Bench', 'amount', $6::text, 'currency', 'KES'),
				'customer', jsonb_build_object('email', 'bench@example.com', 'first_name', 'Bench', 'last_name', 'Customer'),
				'version', 2, 'created_at', $7::timestamptz, 'updated_at', $7::timestamptz), $7, $7
			FROM (SELECT 'SUBB' || $8::text || '_' || lpad(g::text, 7, '0') AS id FROM generate_series(1, $9::int) g) s`,
			c.MerchantID, custID, planID, today, w.WalletID, billingAmount, now, fmt.Sprintf("%s%02d", r.runID, i), k); err != nil {
			return nil, fmt.Errorf("seed subscriptions: %w", err)
		}
	}
	return merchants, nil
}

func okText(ok bool) string {
	if ok {
		return "OK"
	}
	return "FAILED"
}
