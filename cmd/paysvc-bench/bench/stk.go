package bench

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/lib/pq"

	"paysvc/actors/aggregates/wallet/walletstore"
	"paysvc/cmd/paysvc/admin"
	"paysvc/topics"
)

// stk-collect: M-Pesa STK push collections end to end. Closed-loop clients POST
// /api/v1/payment/mpesa-stk-push/ for random non-magic phone numbers, which the
// sandbox simulator completes (ACCEPTED after PAYSVC_SIM_ACCEPT_DELAY, FINAL
// PAYSVC_SIM_FINAL_DELAY later, each fed back as a command). Each collection is
// therefore three engine commands (the push, ACCEPTED, FINAL) and a rail request
// through the outbox, relay and rails role. The bench measures the push request
// (rate and latency), then waits until the database holds every pushed invoice
// COMPLETE and reports collections completed/s from the first push to the last
// completion.

// Targets from the issue for collections.
const (
	targetSTKRate = 3000.0 // collections completed/s end to end
	targetSTKP99  = 25 * time.Millisecond
)

const (
	stkAmount = "100" // shillings; BUSINESS-PAYS: the settlement wallet gets net_amount
	stkRoute  = `route="/api/v1/payment/mpesa-stk-push"`
	// The simulator's delays for the child (docs/sandbox.md: 1 s and 2 s by
	// default, which would make the simulator's in-flight bound the limit).
	stkAcceptDelay = "5ms"
	stkFinalDelay  = "10ms"
	// stkStall ends the wait for completions when none completed for this long.
	stkStall = 30 * time.Second
)

// stkChildEnv is the child's simulator pacing for stk-collect: fast delays, unless
// the caller set them (PAYSVC_* settings are inherited on purpose, for experiments).
func stkChildEnv(getenv func(string) string) map[string]string {
	env := map[string]string{}
	for k, v := range map[string]string{"PAYSVC_SIM_ACCEPT_DELAY": stkAcceptDelay, "PAYSVC_SIM_FINAL_DELAY": stkFinalDelay} {
		if strings.TrimSpace(getenv(k)) == "" {
			env[k] = v
		}
	}
	return env
}

// stkDelays describes the simulator pacing of the service under test.
func (r *runner) stkDelays() string {
	if r.child == nil {
		return "simulator delays: the running service's own"
	}
	get := func(k, def string) string {
		if v := strings.TrimSpace(r.childEnv[k]); v != "" {
			return v
		}
		if v := strings.TrimSpace(os.Getenv(k)); v != "" {
			return v
		}
		return def
	}
	return fmt.Sprintf("simulator ACCEPTED after %s, FINAL %s later",
		get("PAYSVC_SIM_ACCEPT_DELAY", "1s"), get("PAYSVC_SIM_FINAL_DELAY", "2s"))
}

// setupSTK creates the scenario's merchants; each has its KES settlement wallet
// from provisioning, which the collections credit.
func (r *runner) setupSTK(ctx context.Context, name string, merchants int) (*scenarioSetup, error) {
	s := &scenarioSetup{Name: name, Hot: -1, STK: true}
	for i := 0; i < merchants; i++ {
		c, err := admin.CreateMerchant(ctx, r.db, fmt.Sprintf("bench %s %d", name, i+1), "sandbox")
		if err != nil {
			return nil, fmt.Errorf("create merchant: %w", err)
		}
		w, err := walletstore.Settlement(ctx, r.db, c.MerchantID, "KES")
		if err != nil {
			return nil, fmt.Errorf("settlement wallet of %s: %w", c.MerchantID, err)
		}
		s.Merchants = append(s.Merchants, &merchant{ID: c.MerchantID, Secret: c.SecretKey, Auth: "Bearer " + c.SecretKey,
			Settlement: w.WalletID})
	}
	return s, nil
}

// stkPhone is a random 2547XXXXXXXX number whose last four digits are not one of
// the simulator's magic failures (0001-0006, docs/sandbox.md): the customer pays.
func stkPhone(rng *rand.Rand) string {
	n := rng.IntN(100_000_000)
	for tail := n % 10000; tail >= 1 && tail <= 6; tail = n % 10000 {
		n = rng.IntN(100_000_000)
	}
	b := make([]byte, 0, 12)
	b = append(b, "2547"...)
	d := strconv.AppendInt(nil, int64(n), 10)
	for range 8 - len(d) {
		b = append(b, '0')
	}
	return string(append(b, d...))
}

// stkBody is built by hand, like transferBody.
func stkBody(phone string) []byte {
	b := make([]byte, 0, 80)
	b = append(b, `{"phone_number":"`...)
	b = append(b, phone...)
	b = append(b, `","amount":"`+stkAmount+`","api_ref":"bench"}`...)
	return b
}

// doSTK sends one STK push and books its outcome. A 200 means the engine committed
// the PENDING invoice (and its rail request); the bench learns the rest from the
// database.
func (r *runner) doSTK(ctx context.Context, w *worker, m *merchant, phone, idemKey string, measured bool, started time.Time) {
	status, body, err := r.post(ctx, m, "/api/v1/payment/mpesa-stk-push/", stkBody(phone), idemKey)
	lat := time.Since(started)
	if status == http.StatusOK && err == nil {
		r.okCount.Add(1)
		w.stkPushed[m.ID]++
		if !measured {
			w.warmOK++
			return
		}
		w.ok++
		w.lat = append(w.lat, lat)
		return
	}
	if mayHaveIssued(status, body, err) {
		w.stkUnknown++ // may have opened an invoice: the database says
	}
	w.failed(status, body, err, measured)
}

// stkResult is the scenario's end-to-end outcome.
type stkResult struct {
	Merchants []*merchant
	Pushed    int // 200 answers, warmup included
	PushedBy  map[string]int
	Unknown   int // pushes without a known outcome
	Invoices  int // the merchants' invoices in the database at the end
	Complete  int
	Failed    int
	Done      bool // every invoice reached a final state and none is missing

	FirstPush    time.Time // the first push of the phase (warmup included)
	MeasureFrom  time.Time
	LoadEnd      time.Time // the last push answered
	LastComplete time.Time // max(updated_at) of the COMPLETE invoices (the engine's clock)
	InLoad       int       // invoices completed during the measured push window
	OpenToDone   latencySummary
	Server       serverFigures // from the first push to the last completion
	Applied      map[string]float64
}

// rate is collections completed/s end to end.
func (s *stkResult) rate() float64 {
	if s == nil {
		return 0
	}
	d := s.LastComplete.Sub(s.FirstPush).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(s.Complete) / d
}

func (s *stkResult) merchantIDs() pq.StringArray {
	ids := make(pq.StringArray, len(s.Merchants))
	for i, m := range s.Merchants {
		ids[i] = m.ID
	}
	return ids
}

// runSTK runs the scenario: the closed loop of pushes (measured like the
// transfers), then the wait for every pushed invoice to complete.
func (r *runner) runSTK(ctx context.Context, s *scenarioSetup) (phaseResult, error) {
	before := r.snapshot(ctx)
	p := r.observed(ctx, r.o.Warmup, stkRoute, func() phaseResult {
		return r.closedLoop(ctx, s, r.o.Concurrency, r.o.Warmup, r.o.Duration, r.o.Requests)
	})
	res := &stkResult{Merchants: s.Merchants, PushedBy: p.STKPushed, Unknown: p.STKUnknown, FirstPush: p.Started,
		MeasureFrom: p.MeasureFrom, LoadEnd: p.MeasureFrom.Add(p.Elapsed)}
	for _, n := range p.STKPushed {
		res.Pushed += n
	}
	r.stk = res
	if ctx.Err() != nil {
		return p, ctx.Err()
	}
	ids := res.merchantIDs()
	_ = r.db.GetContext(ctx, &s.Partitions, `SELECT count(DISTINCT kafka_partition) FROM processed_commands WHERE merchant_id = ANY($1)`, ids)
	p.Partitions = s.Partitions
	r.printPhase(p)

	if err := r.waitSTK(ctx, res); err != nil {
		return p, err
	}
	after := r.snapshot(ctx)
	res.Server = figuresBetween(before, after, stkRoute)
	if res.Server.OK {
		res.Applied = map[string]float64{}
		for _, t := range []string{topics.CmdInvoiceSTKPush, topics.CmdInvoiceProviderResult} {
			for _, o := range []string{"ok", "rejected", "duplicate"} {
				l := []string{`type="` + t + `"`, `outcome="` + o + `"`}
				if n := after.m.sum("paysvc_engine_commands_applied_total", l...) - before.m.sum("paysvc_engine_commands_applied_total", l...); n > 0 {
					res.Applied[t+" "+o] = n
				}
			}
		}
	}
	if err := r.stkTimes(ctx, res); err != nil {
		return p, err
	}
	r.printSTK(res, p)
	return p, nil
}

// waitSTK polls the database (every 100 ms, only after the load: a count over the
// run's invoices is Postgres work the load would share) until every invoice of the
// scenario's merchants is final and at least every 200 answer has its invoice, or
// nothing completes for stkStall.
func (r *runner) waitSTK(ctx context.Context, res *stkResult) error {
	ids := res.merchantIDs()
	lastFinal, lastChange := -1, time.Now()
	for {
		var c struct {
			Total    int `db:"total"`
			Complete int `db:"complete"`
			Failed   int `db:"failed"`
		}
		if err := r.db.GetContext(ctx, &c, `SELECT count(*) AS total,
			count(*) FILTER (WHERE state = 'COMPLETE') AS complete, count(*) FILTER (WHERE state = 'FAILED') AS failed
			FROM invoices WHERE merchant_id = ANY($1)`, ids); err != nil {
			return fmt.Errorf("stk-collect: count invoices: %w", err)
		}
		res.Invoices, res.Complete, res.Failed = c.Total, c.Complete, c.Failed
		final := c.Complete + c.Failed
		if final == c.Total && c.Total >= res.Pushed {
			res.Done = true
			return nil
		}
		if final != lastFinal {
			lastFinal, lastChange = final, time.Now()
		} else if time.Since(lastChange) > stkStall {
			return nil // reported as not done
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stkTimes reads the completion times from the invoices: the last completion,
// how many completed inside the measured push window, and the time from the
// engine opening each invoice to completing it.
func (r *runner) stkTimes(ctx context.Context, res *stkResult) error {
	var row struct {
		Last   sql.NullTime    `db:"last"`
		InLoad int             `db:"in_load"`
		Q      pq.Float64Array `db:"q"`
		Max    *float64        `db:"max"`
		N      int             `db:"n"`
	}
	err := r.db.GetContext(ctx, &row, `SELECT max(updated_at) AS last,
		count(*) FILTER (WHERE updated_at >= $2 AND updated_at < $3) AS in_load,
		percentile_disc(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY extract(epoch FROM updated_at - created_at)::float8) AS q,
		max(extract(epoch FROM updated_at - created_at)::float8) AS max, count(*) AS n
		FROM invoices WHERE merchant_id = ANY($1) AND state = 'COMPLETE'`, res.merchantIDs(), res.MeasureFrom, res.LoadEnd)
	if err != nil {
		return fmt.Errorf("stk-collect: completion times: %w", err)
	}
	if row.Last.Valid {
		res.LastComplete = row.Last.Time
	}
	res.InLoad = row.InLoad
	sec := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
	if len(row.Q) == 3 && row.Max != nil {
		res.OpenToDone = latencySummary{N: row.N, P50: sec(row.Q[0]), P95: sec(row.Q[1]), P99: sec(row.Q[2]), Max: sec(*row.Max)}
	}
	return nil
}

func (r *runner) printSTK(res *stkResult, p phaseResult) {
	r.printf("  end to end     %d pushed (200, warmup included), %d unknown outcomes; database: %d invoices, %d COMPLETE, %d FAILED, %d not final\n",
		res.Pushed, res.Unknown, res.Invoices, res.Complete, res.Failed, res.Invoices-res.Complete-res.Failed)
	if !res.Done {
		r.printf("                 NOT DONE: gave up after %s without a completion\n", stkStall)
	}
	window := res.LastComplete.Sub(res.FirstPush)
	r.printf("  completed/s    %.0f collections completed/s end to end (%d COMPLETE from the first push to the last completion, %.2fs; last completion %.2fs after the last push)\n",
		res.rate(), res.Complete, window.Seconds(), res.LastComplete.Sub(res.LoadEnd).Seconds())
	if d := res.LoadEnd.Sub(res.MeasureFrom).Seconds(); d > 0 {
		r.printf("  while loaded   %.0f completed/s inside the measured push window (pushes %.0f/s)\n", float64(res.InLoad)/d, p.throughput())
	}
	r.printf("  open->COMPLETE %s (engine clock: the push's batch to the FINAL result's; simulator delays included)\n", res.OpenToDone)
	f := res.Server
	if !f.OK {
		return
	}
	var applied []string
	for _, k := range []string{"invoice.stk_push ok", "invoice.provider_result ok", "invoice.stk_push rejected",
		"invoice.provider_result rejected", "invoice.stk_push duplicate", "invoice.provider_result duplicate"} {
		if n := res.Applied[k]; n > 0 {
			applied = append(applied, fmt.Sprintf("%s %.0f", k, n))
		}
	}
	r.printf("  engine (e2e)   %s; %.0f batches (%.0f/s), commands per batch mean %.1f; commit mean %.2f ms (p99 <= %g ms)\n",
		strings.Join(applied, ", "), f.BatchSize.Count, f.BatchSize.Count/f.Seconds, f.BatchSize.mean(),
		f.Commit.mean()*1000, f.Commit.quantile(0.99)*1000)
	if f.BatchFailures > 0 || f.ReplyTimeouts > 0 {
		r.printf("  trouble        %.0f failed batches, %.0f reply timeouts\n", f.BatchFailures, f.ReplyTimeouts)
	}
	if f.CPU.OK {
		r.printf("  cpu (e2e)      paysvc %.2f, postgres %.2f, bench %.2f, other %.2f; machine busy %.2f of %d (%.1fs, first push to all complete)\n",
			f.CPU.Server, f.CPU.Postgres, f.CPU.Bench, f.CPU.other(true), f.CPU.Busy, runtime.NumCPU(), f.Seconds)
		if res.Complete > 0 {
			n := float64(res.Complete)
			r.printf("  cpu/collection paysvc %.0f us, postgres %.0f us, bench %.0f us (2 cores at 3,000/s allow 667 us in all)\n",
				1e6*f.CPU.Server*f.Seconds/n, 1e6*f.CPU.Postgres*f.Seconds/n, 1e6*f.CPU.Bench*f.Seconds/n)
		}
	}
}

// stkMerchantCheck is one merchant's collections against its settlement wallet.
type stkMerchantCheck struct {
	MerchantID string `db:"merchant_id"`
	WalletID   string `db:"wallet_id"`
	Current    int64  `db:"current_cents"`
	Available  int64  `db:"available_cents"`
	Net        int64  `db:"net_cents"`
	Complete   int    `db:"complete"`
	Total      int    `db:"total"`
}

// printSTKCheck verifies, per merchant, that the settlement wallet holds exactly
// the net_amount of its COMPLETE invoices (collected funds are cleared at once, so
// available too), that every invoice completed, and that every 200 answer has its
// invoice. It prints PASS or FAIL and reports whether it passed.
func (r *runner) printSTKCheck(ctx context.Context, verdict func(bool) string) (bool, error) {
	res := r.stk
	var rows []stkMerchantCheck
	err := r.db.SelectContext(ctx, &rows, `SELECT w.merchant_id, w.wallet_id,
			(w.current_balance * 100)::bigint AS current_cents, (w.available_balance * 100)::bigint AS available_cents,
			coalesce(i.net_cents, 0) AS net_cents, coalesce(i.complete, 0) AS complete, coalesce(i.total, 0) AS total
		FROM wallets w LEFT JOIN (
			SELECT merchant_id, (sum((data->>'net_amount')::numeric) FILTER (WHERE state = 'COMPLETE') * 100)::bigint AS net_cents,
				count(*) FILTER (WHERE state = 'COMPLETE') AS complete, count(*) AS total
			FROM invoices WHERE merchant_id = ANY($1) GROUP BY merchant_id) i USING (merchant_id)
		WHERE w.merchant_id = ANY($1) AND w.wallet_type = 'SETTLEMENT' AND w.currency = 'KES'
		ORDER BY w.merchant_id`, res.merchantIDs())
	if err != nil {
		return false, fmt.Errorf("stk-collect check: %w", err)
	}
	pushed := map[string]int{}
	for _, m := range res.Merchants {
		pushed[m.ID] = 0
	}
	for id, n := range res.PushedBy {
		pushed[id] += n
	}
	var problems []string
	var net, held int64
	var complete int
	for _, c := range rows {
		net += c.Net
		held += c.Current
		complete += c.Complete
		switch {
		case c.Current != c.Net || c.Available != c.Net:
			problems = append(problems, fmt.Sprintf("%s: settlement wallet %s holds %s (available %s), its COMPLETE invoices' net_amount sum to %s",
				c.MerchantID, c.WalletID, centsString(c.Current), centsString(c.Available), centsString(c.Net)))
		case c.Complete != c.Total:
			problems = append(problems, fmt.Sprintf("%s: %d of %d invoices not COMPLETE (no magic numbers were used: all should pay)",
				c.MerchantID, c.Total-c.Complete, c.Total))
		case c.Total < pushed[c.MerchantID] || (res.Unknown == 0 && c.Total != pushed[c.MerchantID]):
			problems = append(problems, fmt.Sprintf("%s: %d invoices, the bench had %d answered 200 (%d unknown outcomes in all)",
				c.MerchantID, c.Total, pushed[c.MerchantID], res.Unknown))
		}
		delete(pushed, c.MerchantID)
	}
	for id := range pushed {
		problems = append(problems, fmt.Sprintf("%s: no KES settlement wallet", id))
	}
	ok := len(problems) == 0 && res.Done
	r.printf("  stk check      %s: %d merchants' settlement wallets hold %s = net_amount of their %d COMPLETE invoices %s; %d problems\n",
		verdict(ok), len(rows), centsString(held), complete, centsString(net), len(problems))
	if !res.Done {
		r.printf("    not every pushed invoice reached a final state (see stk-collect above)\n")
	}
	for i, p := range problems {
		if i == 10 {
			r.printf("    ... %d more\n", len(problems)-10)
			break
		}
		r.printf("    %s\n", p)
	}
	return ok, nil
}
