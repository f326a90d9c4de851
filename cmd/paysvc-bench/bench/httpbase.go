package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/lib/pq"

	"paysvc/actors/values/ids"
	"paysvc/actors/values/money"
)

// The plain HTTP baseline is what a straightforward service
// would be: net/http, the same route and body as paysvc's intra-wallet transfer,
// and one PostgreSQL transaction per transfer that locks both wallets with
// SELECT ... FOR UPDATE, moves the money and writes two ledger rows. It runs as
// its own child process (`paysvc-bench baseline-server`), so its CPU time is read
// from /proc like the service's, and it is driven by the same HTTP client, loop
// and concurrency as the paysvc scenarios, in the same run, on the same wallet ids.

// BaselineServerCommand is the hidden `paysvc-bench` subcommand of the child.
const BaselineServerCommand = "baseline-server"

// IsBaselineServerCommand tells the flag parser that args are the baseline child's.
func IsBaselineServerCommand(args []string) bool {
	return len(args) > 0 && args[0] == BaselineServerCommand
}

// Its tables, in the bench database, never paysvc's.
const (
	plainHTTPWallets = "plainhttp_wallets"
	plainHTTPLedger  = "plainhttp_ledger"
	plainHTTPKeys    = "plainhttp_keys"
)

// ServeBaseline is the baseline child: it serves until ctx ends. conns bounds its
// connection pool (as --baseline-conns does for the in-process loop).
func ServeBaseline(ctx context.Context, dbURL, addr string, conns int, log *slog.Logger) error {
	// One round trip per statement, as pgx or any tuned driver gives.
	db, err := sql.Open("postgres", mustSSL(withQuery(dbURL, "binary_parameters", "yes")))
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	// Secret keys are read once: paysvc also answers authentication from a cache.
	keys := map[string]string{}
	rows, err := db.QueryContext(ctx, `SELECT auth, merchant_id FROM `+plainHTTPKeys)
	if err != nil {
		return err
	}
	for rows.Next() {
		var a, m string
		if err := rows.Scan(&a, &m); err != nil {
			rows.Close()
			return err
		}
		keys[a] = m
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("POST /api/v1/wallets/{src}/intra_transfer/", func(w http.ResponseWriter, req *http.Request) {
		merchant, ok := keys[req.Header.Get("Authorization")]
		if !ok {
			plainHTTPError(w, http.StatusUnauthorized, "bad key")
			return
		}
		var body struct {
			WalletID  string `json:"wallet_id"`
			Amount    string `json:"amount"`
			Narrative string `json:"narrative"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, req.Body, 1<<20)).Decode(&body); err != nil {
			plainHTTPError(w, http.StatusBadRequest, "bad body")
			return
		}
		amount, err := money.Parse(body.Amount)
		if err != nil || amount.Sign() <= 0 {
			plainHTTPError(w, http.StatusBadRequest, "bad amount")
			return
		}
		src := req.PathValue("src")
		if src == body.WalletID {
			plainHTTPError(w, http.StatusBadRequest, "same wallet")
			return
		}
		res, status, err := plainHTTPTransfer(req.Context(), db, merchant, src, body.WalletID, amount.String(), body.Narrative)
		if err != nil {
			log.Warn("baseline transfer failed", "err", err)
			plainHTTPError(w, http.StatusInternalServerError, "internal")
			return
		}
		if status != http.StatusOK {
			plainHTTPError(w, status, "refused")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(res)
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func plainHTTPError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":%q}`, msg)
}

type plainHTTPView struct {
	WalletID       string `json:"wallet_id"`
	CurrentBalance string `json:"current_balance"`
}

// plainHTTPTransfer is the one transaction per transfer: both rows locked in id
// order (no deadlocks), the balance checked, both updated, two ledger rows.
func plainHTTPTransfer(ctx context.Context, db *sql.DB, merchant, src, dst, amount, narrative string) (map[string]plainHTTPView, int, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, 0, err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	rows, err := tx.QueryContext(ctx, `SELECT wallet_id, balance FROM `+plainHTTPWallets+`
		WHERE wallet_id = ANY($1) AND merchant_id = $2 ORDER BY wallet_id FOR UPDATE`, pq.StringArray{src, dst}, merchant)
	if err != nil {
		return nil, 0, err
	}
	bal := map[string]money.Amount{}
	for rows.Next() {
		var id string
		var b money.Amount
		if err := rows.Scan(&id, &b); err != nil {
			rows.Close()
			return nil, 0, err
		}
		bal[id] = b
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	if len(bal) != 2 {
		return nil, http.StatusNotFound, nil
	}
	amt := money.MustParse(amount)
	if bal[src].Cmp(amt) < 0 {
		return nil, http.StatusBadRequest, nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE `+plainHTTPWallets+` SET balance = balance + CASE WHEN wallet_id = $1 THEN -$3::numeric ELSE $3::numeric END,
		version = version + 1 WHERE wallet_id IN ($1, $2)`, src, dst, amount); err != nil {
		return nil, 0, err
	}
	txn := ids.Alias(12)
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+plainHTTPLedger+` (transaction_id, wallet_id, amount, narrative)
		VALUES ($1, $2, -$4::numeric, $5), ($1, $3, $4::numeric, $5)`, txn, src, dst, amount, narrative); err != nil {
		return nil, 0, err
	}
	if err := tx.Commit(); err != nil {
		return nil, 0, err
	}
	return map[string]plainHTTPView{
		"origin":      {WalletID: src, CurrentBalance: bal[src].Sub(amt).String()},
		"destination": {WalletID: dst, CurrentBalance: bal[dst].Add(amt).String()},
	}, http.StatusOK, nil
}

// setupPlainHTTP gives the baseline the bench's wallets (same ids, merchants and
// deposits) and the merchants' keys, in its own tables.
func (r *runner) setupPlainHTTP(ctx context.Context) error {
	stmts := []string{
		`CREATE TABLE ` + plainHTTPWallets + ` (wallet_id text PRIMARY KEY, merchant_id text NOT NULL,
			balance numeric(20, 2) NOT NULL CHECK (balance >= 0), version bigint NOT NULL DEFAULT 1)`,
		`CREATE TABLE ` + plainHTTPLedger + ` (entry_id bigserial PRIMARY KEY, transaction_id text NOT NULL, wallet_id text NOT NULL,
			amount numeric(20, 2) NOT NULL, narrative text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`,
		`CREATE INDEX ON ` + plainHTTPLedger + ` (wallet_id, entry_id DESC)`,
		`CREATE TABLE ` + plainHTTPKeys + ` (auth text PRIMARY KEY, merchant_id text NOT NULL)`,
	}
	for _, q := range stmts {
		if _, err := r.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("plain HTTP baseline tables: %w", err)
		}
	}
	var wids, wms, bals []string
	keys := map[string]string{}
	for _, w := range r.wallets {
		wids = append(wids, w.ID)
		wms = append(wms, w.Merchant.ID)
		bals = append(bals, centsString(w.Deposited))
		keys[w.Merchant.Auth] = w.Merchant.ID
	}
	if _, err := r.db.ExecContext(ctx, `INSERT INTO `+plainHTTPWallets+` (wallet_id, merchant_id, balance)
		SELECT * FROM unnest($1::text[], $2::text[], $3::numeric[])`, pq.StringArray(wids), pq.StringArray(wms), pq.StringArray(bals)); err != nil {
		return fmt.Errorf("plain HTTP baseline wallets: %w", err)
	}
	for a, m := range keys {
		if _, err := r.db.ExecContext(ctx, `INSERT INTO `+plainHTTPKeys+` VALUES ($1, $2)`, a, m); err != nil {
			return err
		}
	}
	return nil
}

// startBaselineChild runs `paysvc-bench baseline-server` on a free loopback port.
func (r *runner) startBaselineChild(ctx context.Context, conns int) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	logPath := filepath.Join(r.childDir, "baseline.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(exe, BaselineServerCommand, "--addr", addr, "--conns", strconv.Itoa(conns))
	cmd.Env = withEnv(os.Environ(), map[string]string{"PAYSVC_DATABASE_URL": r.dbURL, "PAYSVC_LOG_LEVEL": "warn", "PAYSVC_LOG_FORMAT": "text"})
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, base: "http://" + addr, dir: r.childDir, logPath: logPath, exited: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	if err := c.waitHealthy(ctx, 30*time.Second); err != nil {
		c.stop()
		return nil, fmt.Errorf("%w\n%s", err, c.logTail(20))
	}
	return c, nil
}

// runPlainHTTP drives the baseline child with each transfer scenario's closed
// loop, after paysvc has been stopped, and checks its conservation.
func (r *runner) runPlainHTTP(ctx context.Context, setups []*scenarioSetup) (map[string]phaseResult, error) {
	out := map[string]phaseResult{}
	if r.o.URL != "" || r.childDir == "" {
		r.printf("\nplain HTTP baseline: skipped (it needs the bench's own database; not with --url)\n")
		return out, nil
	}
	if err := r.setupPlainHTTP(ctx); err != nil {
		return nil, err
	}
	conns := min(r.o.Concurrency, r.o.BaselineConns)
	c, err := r.startBaselineChild(ctx, conns)
	if err != nil {
		return nil, fmt.Errorf("plain HTTP baseline: %w", err)
	}
	defer func() {
		if err := c.stop(); err != nil {
			r.printf("plain HTTP baseline stop: %v\n", err)
		}
		if n := c.logLines(); n > 0 {
			r.printf("plain HTTP baseline log: %d lines, last ones:\n%s\n", n, c.logTail(10))
		}
	}()
	base := r.base
	r.base = c.base
	defer func() { r.base = base }()
	committed := 0
	for _, s := range setups {
		before := sampleCPU(nil)
		beforeSrv, _ := procCPU("/proc/" + strconv.Itoa(c.pid()) + "/stat")
		var measuredFrom cpuTimes
		var measuredSrv float64
		mark := make(chan struct{})
		go func() {
			defer close(mark)
			select {
			case <-time.After(r.o.Warmup):
			case <-ctx.Done():
			}
			measuredFrom = sampleCPU(nil)
			measuredSrv, _ = procCPU("/proc/" + strconv.Itoa(c.pid()) + "/stat")
		}()
		p := r.closedLoop(ctx, s, r.o.Concurrency, r.o.Warmup, r.o.Duration, r.o.Requests)
		<-mark
		after := sampleCPU(nil)
		afterSrv, _ := procCPU("/proc/" + strconv.Itoa(c.pid()) + "/stat")
		if r.o.Requests > 0 || measuredFrom.At.IsZero() {
			measuredFrom, measuredSrv = before, beforeSrv
		}
		measuredFrom.Server, after.Server = measuredSrv, afterSrv
		p.Mode = "plainhttp"
		p.Server = serverFigures{}
		out[s.Name] = p
		committed += p.OK + p.WarmOK
		r.printPhase(p)
		if use := cpuBetween(measuredFrom, after); use.OK {
			r.printf("  cpu (cores)    plain server %.2f, postgres %.2f, bench %.2f, other %.2f; machine busy %.2f of %d\n",
				use.Server, use.Postgres, use.Bench, use.other(true), use.Busy, runtime.NumCPU())
			if tps := p.throughput(); tps > 0 {
				r.printf("  cpu/transfer   plain server %.0f us, postgres %.0f us\n", 1e6*use.Server/tps, 1e6*use.Postgres/tps)
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	msg, ok, err := r.checkPlainHTTP(ctx, committed)
	if err != nil {
		return nil, err
	}
	r.printBaselineCheck(msg, ok)
	return out, nil
}

// checkPlainHTTP: the baseline's wallets hold what they were given, none is
// negative, its ledger sums to zero and has two rows per 200 answer.
func (r *runner) checkPlainHTTP(ctx context.Context, committed int) (string, bool, error) {
	var sum, ledgerSum money.Amount
	var negative, rows int64
	if err := r.db.QueryRowContext(ctx, `SELECT sum(balance), count(*) FILTER (WHERE balance < 0),
		(SELECT coalesce(sum(amount), 0) FROM `+plainHTTPLedger+`), (SELECT count(*) FROM `+plainHTTPLedger+`)
		FROM `+plainHTTPWallets).Scan(&sum, &negative, &ledgerSum, &rows); err != nil {
		return "", false, err
	}
	var want int64
	for _, w := range r.wallets {
		want += w.Deposited
	}
	got, err := sum.Cents()
	if err != nil {
		return "", false, err
	}
	ok := got == want && negative == 0 && ledgerSum.Sign() == 0 && rows == 2*int64(committed)
	return fmt.Sprintf("sum %s (expected %s), negative wallets %d, ledger sum %s, ledger rows %d (200 answers %d)",
		centsString(got), centsString(want), negative, ledgerSum, rows, committed), ok, nil
}

// ratioLine is a scenario's paysvc figure against the baselines of the same run.
func ratioLine(name string, p phaseResult, httpPlain, sqlPlain map[string]phaseResult) string {
	line := fmt.Sprintf("  %-16s paysvc %7.0f/s", name, p.throughput())
	if q, ok := httpPlain[name]; ok && q.throughput() > 0 {
		line += fmt.Sprintf("   plain HTTP+Postgres %6.0f/s   paysvc/plain-HTTP %.2fx", q.throughput(), p.throughput()/q.throughput())
	}
	if q, ok := sqlPlain[name]; ok && q.throughput() > 0 {
		line += fmt.Sprintf("   (SQL loop without HTTP %6.0f/s)", q.throughput())
	}
	return line
}

// Targets against the plain HTTP service of the same run (docs/benchmarks.md).
var targetVsPlainHTTP = map[string]float64{ScenarioSpread: 3, ScenarioHot: 8}

func (r *runner) printPlainHTTPTargets(res, httpPlain map[string]phaseResult, met func(bool) string) {
	for _, name := range r.o.Scenarios {
		want, has := targetVsPlainHTTP[name]
		p, ok1 := res[name]
		q, ok2 := httpPlain[name]
		if !has || !ok1 || !ok2 || q.throughput() <= 0 {
			continue
		}
		ratio := p.throughput() / q.throughput()
		r.printf("  %-40s %-10s %s\n", fmt.Sprintf("%s >= %.0fx plain HTTP+Postgres", strings.TrimPrefix(name, "transfer-"), want),
			fmt.Sprintf("%.2fx", ratio), met(ratio >= want))
	}
}
