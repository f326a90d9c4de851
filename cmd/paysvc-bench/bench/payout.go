package bench

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/lib/pq"

	"paysvc/actors/aggregates/wallet/walletstore"
	"paysvc/cmd/paysvc/admin"
)

// payout-file: payment files end to end. A file of 10,000 MPESA-B2C transactions
// with requires_approval NO is posted to /api/v1/send-money/initiate, and the bench
// waits until the database shows it COMPLETE: initiation (one command of every
// transaction, its hold), 20 rail requests through the outbox, relay and rails role,
// the sandbox rail's SUBMITTED and FINAL reports after its default delay
// (PAYSVC_SIM_PAYOUT_DELAY, 2 s), each a command that moves up to 500 transactions
// and their money. Then several clients post files back to back for --duration and
// the bench reports transactions completed per second from the first post to the
// last completion.

// Targets from the issue for payouts.
const (
	targetPayoutFile = 10 * time.Second // a 10,000-transaction file, initiation to COMPLETE
	targetPayoutRate = 5000.0           // payout transactions/s steady
)

const (
	payoutFileSize    = 10_000
	payoutSteadySize  = 5_000
	payoutClients     = 4
	payoutAmount      = "100" // per transaction; the B2C fee is the minimum, 10
	payoutDeposit     = "9000000"
	payoutCompleteMax = 5 * time.Minute
)

// payoutResult is the scenario's outcome.
type payoutResult struct {
	FileTook     time.Duration // the single file, initiation to COMPLETE
	InitiateTook time.Duration // its initiation request
	Files        int           // steady phase: files completed
	Txns         int           // steady phase: transactions completed
	SteadyTook   time.Duration // steady phase: first post to last completion
	Reconciled   bool          // every file: paid + failed = total, wallets balance
	Problems     []string
}

func (p *payoutResult) rate() float64 {
	if p == nil || p.SteadyTook <= 0 {
		return 0
	}
	return float64(p.Txns) / p.SteadyTook.Seconds()
}

// payoutBody is a file of n B2C transactions to accounts that the sandbox pays.
func payoutBody(n int, ref string) []byte {
	b := make([]byte, 0, n*80+200)
	b = append(b, `{"currency":"KES","provider":"MPESA-B2C","requires_approval":"NO","batch_reference":"`...)
	b = append(b, ref...)
	b = append(b, `","transactions":[`...)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		// 25471NNNNNN5: never one of the sandbox's magic suffixes (docs/sandbox.md).
		acct := fmt.Sprintf("25471%06d5", i)
		b = append(b, `{"account":"`...)
		b = append(b, acct...)
		b = append(b, `","amount":"`+payoutAmount+`","name":"Bench worker","narrative":"Payroll"}`...)
	}
	return append(b, `]}`...)
}

// runPayoutFile runs the scenario on its own merchants.
func (r *runner) runPayoutFile(ctx context.Context) (*payoutResult, error) {
	res := &payoutResult{Reconciled: true}
	var ms []*merchant
	for i := 0; i < payoutClients; i++ {
		c, err := admin.CreateMerchant(ctx, r.db, fmt.Sprintf("bench payout %d", i+1), "sandbox")
		if err != nil {
			return nil, fmt.Errorf("create merchant: %w", err)
		}
		w, err := walletstore.Settlement(ctx, r.db, c.MerchantID, "KES")
		if err != nil {
			return nil, err
		}
		m := &merchant{ID: c.MerchantID, Secret: c.SecretKey, Auth: "Bearer " + c.SecretKey, Settlement: w.WalletID}
		if _, err := r.postRetry(ctx, m, "/api/v1/sandbox/wallets/"+w.WalletID+"/deposit/",
			[]byte(`{"amount":"`+payoutDeposit+`"}`), http.StatusOK); err != nil {
			return nil, fmt.Errorf("deposit: %w", err)
		}
		ms = append(ms, m)
	}

	// One file, alone.
	ref := "bench-file-" + r.runID
	body := payoutBody(payoutFileSize, ref)
	start := time.Now()
	status, resp, err := r.post(ctx, ms[0], "/api/v1/send-money/initiate", body, ref)
	res.InitiateTook = time.Since(start)
	if err != nil || status != http.StatusOK {
		return nil, fmt.Errorf("initiate: %d %s %v", status, resp, err)
	}
	done, err := r.waitFiles(ctx, ms[0].ID, []string{ref}, payoutCompleteMax)
	if err != nil {
		return nil, err
	}
	res.FileTook = done.Sub(start)
	r.printf("payout-file: one %d-transaction MPESA-B2C file: initiation answered in %s, COMPLETE after %s\n",
		payoutFileSize, res.InitiateTook.Round(time.Millisecond), res.FileTook.Round(time.Millisecond))

	// Steady: clients post files back to back for the duration.
	steadyStart := time.Now()
	deadline := steadyStart.Add(r.o.Duration)
	refs := make([][]string, len(ms))
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var postErr error
	for i, m := range ms {
		wg.Go(func() {
			for n := 0; time.Now().Before(deadline) && ctx.Err() == nil; n++ {
				ref := "bench-steady-" + r.runID + "-" + strconv.Itoa(i) + "-" + strconv.Itoa(n)
				status, resp, err := r.post(ctx, m, "/api/v1/send-money/initiate", payoutBody(payoutSteadySize, ref), ref)
				if err != nil || status != http.StatusOK {
					errMu.Lock()
					postErr = fmt.Errorf("initiate: %d %.200s %v", status, resp, err)
					errMu.Unlock()
					return
				}
				refs[i] = append(refs[i], ref)
			}
		})
	}
	wg.Wait()
	if postErr != nil {
		return nil, postErr
	}
	last := time.Time{}
	for i, m := range ms {
		t, err := r.waitFiles(ctx, m.ID, refs[i], payoutCompleteMax)
		if err != nil {
			return nil, err
		}
		if t.After(last) {
			last = t
		}
		res.Files += len(refs[i])
	}
	res.Txns = res.Files * payoutSteadySize
	res.SteadyTook = last.Sub(steadyStart)
	r.printf("payout-file: steady, %d clients posting %d-transaction files for %s: %d files, %d transactions COMPLETE in %s: %.0f transactions/s\n",
		payoutClients, payoutSteadySize, r.o.Duration, res.Files, res.Txns, res.SteadyTook.Round(time.Millisecond), res.rate())

	// Reconciliation: every file paid in full, every wallet down by exactly its
	// files' amounts and charges, nothing held.
	for i, m := range ms {
		txns := len(refs[i]) * payoutSteadySize
		if i == 0 { // the first merchant also paid the single big file
			txns += payoutFileSize
		}
		var paid, failed int
		if err := r.db.GetContext(ctx, &paid, `SELECT count(*) FROM payout_transactions WHERE merchant_id = $1 AND status = 'COMPLETE'`, m.ID); err != nil {
			return nil, err
		}
		if err := r.db.GetContext(ctx, &failed, `SELECT count(*) FROM payout_transactions WHERE merchant_id = $1 AND status <> 'COMPLETE'`, m.ID); err != nil {
			return nil, err
		}
		var cur, avail string
		if err := r.db.QueryRowContext(ctx, `SELECT current_balance::text, available_balance::text FROM wallets WHERE wallet_id = $1`,
			m.Settlement).Scan(&cur, &avail); err != nil {
			return nil, err
		}
		want := fmt.Sprintf("%d.00", 9_000_000-txns*110)
		if paid != txns || failed != 0 || cur != want || avail != want {
			res.Reconciled = false
			res.Problems = append(res.Problems, fmt.Sprintf("merchant %d: %d paid, %d not, of %d; wallet %s/%s, want %s",
				i+1, paid, failed, txns, cur, avail, want))
		}
	}
	// Every event reached Kafka. One the broker refused is dead-lettered, and its
	// file then completes only through the rail's recovery, minutes late: the
	// timings above would measure that recovery, not the pipeline.
	var dead int
	if err := r.db.GetContext(ctx, &dead, `SELECT count(*) FROM outbox_dead`); err != nil {
		return nil, err
	}
	if dead > 0 {
		res.Reconciled = false
		res.Problems = append(res.Problems, fmt.Sprintf("%d events dead-lettered (outbox_dead): Kafka refused them", dead))
	}
	return res, nil
}

// waitFiles waits until every file (by batch reference) of the merchant is
// COMPLETE and returns when the last one completed (the engine's clock).
func (r *runner) waitFiles(ctx context.Context, merchantID string, refs []string, limit time.Duration) (time.Time, error) {
	deadline := time.Now().Add(limit)
	for {
		var open int
		var last *time.Time
		err := r.db.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE status <> 'COMPLETE'), max(updated_at)
			FROM payout_files WHERE merchant_id = $1 AND data ->> 'batch_reference' = ANY($2)`,
			merchantID, pq.StringArray(refs)).Scan(&open, &last)
		if err != nil {
			return time.Time{}, err
		}
		var found int
		if err := r.db.GetContext(ctx, &found, `SELECT count(*) FROM payout_files WHERE merchant_id = $1 AND data ->> 'batch_reference' = ANY($2)`,
			merchantID, pq.StringArray(refs)); err != nil {
			return time.Time{}, err
		}
		if open == 0 && found == len(refs) && last != nil {
			return *last, nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("payout files not COMPLETE after %s: %d of %d open", limit, open+len(refs)-found, len(refs))
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// printPayoutTargets prints the scenario's figures against the targets.
func (r *runner) printPayoutTargets(p *payoutResult) {
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	r.printf("  payout-file  10,000-transaction file to COMPLETE %8s  target <= %s  %s\n",
		p.FileTook.Round(time.Millisecond), targetPayoutFile, verdict(p.FileTook <= targetPayoutFile))
	r.printf("  payout-file  steady payout transactions/s        %8.0f  target >= %.0f  %s\n",
		p.rate(), targetPayoutRate, verdict(p.rate() >= targetPayoutRate))
	if !p.Reconciled {
		for _, x := range p.Problems {
			r.printf("  payout-file  RECONCILIATION FAILED: %s\n", x)
		}
	} else {
		r.printf("  payout-file  every file paid in full; every wallet down by exactly its files' amounts and charges, nothing held, no event dead-lettered\n")
	}
}
