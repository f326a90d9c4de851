package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"paysvc/storage"
	"paysvc/topics"
)

// Scenario names, in the order a default run takes them.
const (
	ScenarioSpread = "transfer-spread"
	ScenarioHot    = "transfer-hot"
	// ScenarioMerchant is one merchant's funded wallets, random distinct pairs: every
	// command goes to one command partition (the key is the merchant), so it measures
	// what one partition worker carries (docs/benchmarks.md).
	ScenarioMerchant = "transfer-merchant"
	ScenarioSTK      = "stk-collect" // M-Pesa STK collections; only when named (see stk.go)
	ScenarioPayout   = "payout-file" // payment files end to end (see payout.go)
	// ScenarioWebhooks is signed webhook deliveries; only when named (see webhooks.go).
	ScenarioWebhooks = "webhooks"
	// ScenarioBilling bills due subscription cycles; only when named (see billing.go).
	ScenarioBilling = "billing-run"
)

// Scenarios is the default run, in run order (`make bench`).
var Scenarios = []string{ScenarioSpread, ScenarioMerchant, ScenarioHot, ScenarioPayout}

// OptionalScenarios run only when --scenario names them: they are not part of the
// default run, so `make bench` keeps its runtime.
var OptionalScenarios = []string{ScenarioSTK, ScenarioWebhooks, ScenarioBilling, ScenarioMemory}

// KnownScenarios is every scenario --scenario accepts.
func KnownScenarios() []string { return slices.Concat(Scenarios, OptionalScenarios) }

// ScenarioHelp is the --scenario flag's help text.
func ScenarioHelp() string {
	return "comma-separated scenarios to run, in order: " + strings.Join(Scenarios, ", ") +
		" (the default run); also " + strings.Join(OptionalScenarios, ", ") +
		" (M-Pesa STK push collections through the sandbox simulator, end to end; signed webhook deliveries to local receivers;" +
		" the service's RSS with --memory-wallets seeded wallets, --memory-active of them active;" +
		" not in the default run)"
}

// Targets from the issue that asked for this benchmark.
const (
	targetSpread      = 5000.0 // transfers/s, on the 2-core machine
	targetHotRatio    = 0.9    // hot over spread
	targetHalfRateP99 = 25 * time.Millisecond
	// transfer-merchant over spread; its wallet count is merchantWallets.
	targetMerchantRatio = 0.9
	merchantWallets     = 100
)

// Options is the whole configuration of a run; `paysvc-bench` fills it from flags.
type Options struct {
	Scenarios        []string
	Merchants        int // transfer-spread merchants
	Wallets          int // transfer-spread wallets per merchant
	HotSources       int // transfer-hot funded source wallets
	Concurrency      int
	Duration         time.Duration
	Requests         int // when > 0, measure this many requests instead of Duration
	Warmup           time.Duration
	HalfRateDuration time.Duration // 0 skips the open-loop phase
	// OpenRate, when > 0, is the open-loop phase's rate instead of half the
	// measured spread rate, so two binaries can be compared at one offered load.
	OpenRate      float64
	Baseline      bool
	BaselineConns int // the plain loop uses min(Concurrency, BaselineConns) connections
	// BaselineBinaryParameters gives the plain loop one round trip per statement.
	BaselineBinaryParameters bool
	Deposit                  string
	IdempotencyKeys          bool
	Keep                     bool
	URL                      string // an already running service; DatabaseURL is then its database
	MetricsURL               string // with URL: that service's operator listener (its /metrics)
	DatabaseURL              string // the server the bench database is created on (or, with URL, the database)
	Service                  string // the paysvc binary the child service runs (not with URL)
	ServerCPUProfile         string // write a CPU profile of the child service here
	Seed                     uint64
	Progress                 bool    // print each second's successful transfers
	WebhookBacklog           int     // webhooks: transfers made before the dispatcher starts
	WebhookRate              float64 // webhooks: open-loop transfers/s with the dispatcher running (0: half the backlog's rate)
	Subscriptions            int     // billing-run: ACTIVE subscriptions due at once
	Out                      io.Writer
	Log                      *slog.Logger

	// Baseline runs the plain HTTP + Postgres service (httpbase.go), on
	// min(Concurrency, BaselineConns) connections; SQLLoop also the in-process SQL
	// loop without HTTP (plain.go).
	SQLLoop bool
	// wallets-1m (memory.go): wallets seeded, funded wallets of the first phase,
	// and the idle time after the load for passivation (0 skips it).
	MemoryWallets, MemoryActive int
	MemoryIdleWait              time.Duration
}

// Validate names the first bad option; Run calls it too.
func (o *Options) Validate() error {
	known := KnownScenarios()
	if len(o.Scenarios) == 0 {
		return errors.New("--scenario: at least one of " + strings.Join(known, ", "))
	}
	for i, s := range o.Scenarios {
		if !slices.Contains(known, s) {
			return fmt.Errorf("--scenario: unknown %q (known: %s; %s is not in the default run)",
				s, strings.Join(known, ", "), strings.Join(OptionalScenarios, ", "))
		}
		if slices.Contains(o.Scenarios[:i], s) {
			return fmt.Errorf("--scenario: %q named twice", s)
		}
	}
	switch {
	case o.Merchants < 1:
		return errors.New("--merchants: must be >= 1")
	case o.Wallets < 2:
		return errors.New("--wallets: must be >= 2 (a transfer needs two wallets)")
	case o.HotSources < 1:
		return errors.New("--hot-sources: must be >= 1")
	case o.Concurrency < 1:
		return errors.New("--concurrency: must be >= 1")
	case o.Requests < 0:
		return errors.New("--requests: must be >= 0")
	case o.Requests == 0 && o.Duration <= 0:
		return errors.New("--duration: must be > 0 (or set --requests)")
	case o.Warmup < 0 || o.HalfRateDuration < 0:
		return errors.New("--warmup and --half-rate-duration must be >= 0")
	case o.OpenRate < 0 || math.IsNaN(o.OpenRate) || math.IsInf(o.OpenRate, 0):
		return errors.New("--open-rate: must be a finite number >= 0")
	case o.BaselineConns < 1:
		return errors.New("--baseline-conns: must be >= 1")
	case o.DatabaseURL == "":
		return errors.New("PAYSVC_DATABASE_URL is not set")
	case o.URL != "" && o.ServerCPUProfile != "":
		return errors.New("--server-cpuprofile needs the bench to start the service (no --url)")
	case slices.Contains(o.Scenarios, ScenarioBilling) && o.Subscriptions < 1:
		return errors.New("--subscriptions: must be >= 1")
	case o.URL != "" && slices.Contains(o.Scenarios, ScenarioWebhooks):
		return errWebhooksNeedChild
	case slices.Contains(o.Scenarios, ScenarioWebhooks) && (o.WebhookBacklog < 1 || o.WebhookRate < 0):
		return errors.New("--webhook-backlog must be >= 1 and --webhook-rate >= 0")
	case o.URL != "" && slices.Contains(o.Scenarios, ScenarioMemory):
		return errors.New("--scenario " + ScenarioMemory + " reads the service's RSS and seeds its database: it needs the bench to start the service (no --url)")
	case slices.Contains(o.Scenarios, ScenarioMemory) && (o.MemoryActive < 2*o.Merchants || o.MemoryWallets < o.MemoryActive || o.MemoryIdleWait < 0):
		return errors.New("--memory-active must be >= 2 x --merchants, --memory-wallets >= --memory-active, --memory-idle-wait >= 0")
	}
	if _, err := parseCents(o.Deposit); err != nil {
		return err
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return nil
}

// runner is one run's state.
type runner struct {
	o        Options
	out      io.Writer
	runID    string
	seed     uint64
	base     string // the service's http://host:port
	admin    string // the service's operator listener, http://host:port (/metrics)
	http     *http.Client
	db       *sqlx.DB // the bench database (paysvc's tables)
	wallets  []*benchWallet
	delta    []int64 // model: per wallet, cents moved in minus out by 200 answers
	unknown  []transferReq
	seq      atomic.Uint64
	okCount  atomic.Int64 // successful transfers so far, for --progress
	phaseN   int
	child    *child
	stk      *stkResult        // the stk-collect scenario's end-to-end figures and checks
	payout   *payoutResult     // the payout-file scenario's figures and reconciliation
	childEnv map[string]string // what the bench set in the child's environment beyond isolation
	dbURL    string            // the bench database
	childDir string            // the service's data dir and log (a dispatcher child gets a subdirectory)
	hooks    *hookReceiver     // the webhooks scenario's receivers
	webhooks *webhookResult    // the webhooks scenario's figures and checks
	mem      *memSetup         // the wallets-1m scenario's population
	memRes   *memResult        // and its memory figures
}

func (r *runner) printf(format string, a ...any) { fmt.Fprintf(r.out, format, a...) }

// Run is `paysvc-bench`. It returns an error when the run could not be completed
// or a conservation check failed; missed performance targets are reported, not
// errors.
func Run(ctx context.Context, o Options) (err error) {
	if err := o.Validate(); err != nil {
		return err
	}
	now := time.Now()
	r := &runner{o: o, out: o.Out, runID: fmt.Sprint(now.Unix()), seed: o.Seed}
	if r.seed == 0 {
		r.seed = uint64(now.UnixNano())
	}
	pool := r.openLoopWorkers()
	tr := &http.Transport{MaxIdleConns: pool, MaxIdleConnsPerHost: pool, IdleConnTimeout: 90 * time.Second, DisableCompression: true}
	r.http = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	defer tr.CloseIdleConnections()

	// Cleanup runs on every path, including Ctrl-C (ctx is cancelled by SIGINT and
	// SIGTERM): stop the child, then drop the database it used.
	bg := context.WithoutCancel(ctx)
	var dbName, dir string
	defer func() {
		if r.db != nil {
			r.db.Close()
		}
		if r.child != nil {
			r.stopChild()
		}
		if dbName != "" {
			if o.Keep {
				r.printf("kept database %s\n", dbName)
			} else if derr := dropDatabase(bg, o.DatabaseURL, dbName); derr != nil {
				err = errors.Join(err, derr)
			}
		}
		if dir != "" {
			if o.Keep {
				r.printf("kept service data and log in %s\n", dir)
			} else {
				os.RemoveAll(dir)
			}
		}
	}()

	dbURL, err := r.startService(ctx, &dbName, &dir)
	if err != nil {
		return err
	}
	r.dbURL = dbURL
	if r.db, err = storage.Open(ctx, dbURL, 10*time.Second); err != nil {
		return err
	}
	if err := r.printMachine(ctx); err != nil {
		return err
	}

	// Setup of every scenario first, so no scenario's load runs during another's setup.
	setups, err := r.setupAll(ctx)
	if err != nil {
		return err
	}

	// Load.
	results, half, err := r.runLoad(ctx, setups)
	if err != nil {
		return err
	}

	if slices.Contains(o.Scenarios, ScenarioPayout) {
		if r.payout, err = r.runPayoutFile(ctx); err != nil {
			return fmt.Errorf("%s: %w", ScenarioPayout, err)
		}
	}

	if slices.Contains(o.Scenarios, ScenarioBilling) {
		if _, err := r.runBilling(ctx); err != nil {
			return err
		}
	}

	// Conservation.
	checksOK, err := r.printChecks(ctx)
	if err != nil {
		return err
	}

	// The service is done: stop it before the baseline so the plain loop has the
	// machine to itself, as paysvc had it (except for the load generator).
	if r.child != nil {
		r.stopChild()
	}

	// Baselines: they have a shape for the transfer scenarios only. The plain HTTP
	// service is what the ratios are against; the SQL loop (no HTTP) only when asked.
	plain, plainHTTP := map[string]phaseResult{}, map[string]phaseResult{}
	transfers := slices.DeleteFunc(slices.Clone(setups), func(s *scenarioSetup) bool { return s.STK || s.Webhooks || s.Memory })
	if o.Baseline && len(transfers) > 0 {
		if plainHTTP, err = r.runPlainHTTP(ctx, transfers); err != nil {
			return err
		}
	}
	if o.Baseline && o.SQLLoop && len(transfers) > 0 {
		if plain, err = r.runBaseline(ctx, dbURL, transfers); err != nil {
			return err
		}
	}
	r.printTargets(results, half, plain, plainHTTP)
	if r.payout != nil {
		r.printPayoutTargets(r.payout)
		if !r.payout.Reconciled {
			return errors.New("bench: payout-file reconciliation FAILED (see above)")
		}
	}
	if !checksOK {
		return errors.New("bench: conservation check FAILED (see above)")
	}
	return nil
}

// runLoad runs each set-up scenario's load in turn, then the spread scenario at
// half its rate (open loop), and returns their results.
func (r *runner) runLoad(ctx context.Context, setups []*scenarioSetup) (map[string]phaseResult, *phaseResult, error) {
	o := r.o
	results := map[string]phaseResult{}
	for _, s := range setups {
		if s.Webhooks {
			p, err := r.runWebhooks(ctx, s)
			if err != nil {
				return nil, nil, err
			}
			results[s.Name] = p
			continue
		}
		if s.STK {
			p, err := r.runSTK(ctx, s)
			if err != nil {
				return nil, nil, err
			}
			results[s.Name] = p
			continue
		}
		if s.Memory {
			p, err := r.runMemory(ctx, s)
			if err != nil {
				return nil, nil, err
			}
			results[s.Name] = p
			continue
		}
		p := r.observed(ctx, o.Warmup, transferRoute, func() phaseResult {
			return r.closedLoop(ctx, s, o.Concurrency, o.Warmup, o.Duration, o.Requests)
		})
		p.Partitions = s.Partitions
		results[s.Name] = p
		r.printPhase(p)
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
	}
	var half *phaseResult
	if spread, ok := results[ScenarioSpread]; ok && o.HalfRateDuration > 0 && spread.throughput() > 0 {
		rate := spread.throughput() / 2
		if o.OpenRate > 0 {
			rate = o.OpenRate
		}
		hw := min(time.Second, o.Warmup)
		s := setups[slices.IndexFunc(setups, func(s *scenarioSetup) bool { return s.Name == ScenarioSpread })]
		p := r.observed(ctx, hw, transferRoute, func() phaseResult {
			return r.openLoop(ctx, s, rate, hw, o.HalfRateDuration, r.openLoopWorkers())
		})
		p.Partitions = s.Partitions
		half = &p
		r.printPhase(p)
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
	}
	return results, half, nil
}

// startService starts the paysvc under test on a database of its own (named in
// *dbName, its data in *dir, for Run's cleanup), unless Options.URL names a
// running one, and returns the database URL the bench reads.
func (r *runner) startService(ctx context.Context, dbName, dir *string) (string, error) {
	var err error
	o := r.o
	dbURL := o.DatabaseURL
	if o.URL == "" {
		*dbName = "paysvc_bench_" + r.runID
		if err := createDatabase(ctx, o.DatabaseURL, *dbName); err != nil {
			*dbName = ""
			return "", err
		}
		if dbURL, err = databaseURL(o.DatabaseURL, *dbName); err != nil {
			return "", err
		}
		if *dir, err = os.MkdirTemp("", "paysvc-bench-"); err != nil {
			return "", err
		}
		started := time.Now()
		cc := childConfig{Service: o.Service, DatabaseURL: dbURL, CPUProfile: o.ServerCPUProfile, Dir: *dir}
		if slices.Contains(o.Scenarios, ScenarioSTK) {
			cc.Env = stkChildEnv(os.Getenv)
		}
		if slices.Contains(o.Scenarios, ScenarioWebhooks) {
			if cc.Env == nil {
				cc.Env = map[string]string{}
			}
			maps.Copy(cc.Env, webhookChildEnv(os.Getenv))
		}
		if slices.Contains(o.Scenarios, ScenarioMemory) {
			if cc.Env == nil {
				cc.Env = map[string]string{}
			}
			maps.Copy(cc.Env, memoryChildEnv(os.Getenv))
		}
		r.childDir = *dir
		r.childEnv = cc.Env
		if r.child, err = startChild(ctx, cc); err != nil {
			return "", err
		}
		r.base, r.admin = r.child.base, r.child.admin
		r.printf("service: paysvc serve (pid %d) on %s, database %s, healthy after %s\n",
			r.child.pid(), r.base, *dbName, time.Since(started).Round(time.Millisecond))
	} else {
		r.base, r.admin = strings.TrimRight(o.URL, "/"), strings.TrimRight(o.MetricsURL, "/")
		r.printf("service: %s (already running), database from PAYSVC_DATABASE_URL\n", r.base)
	}
	return dbURL, nil
}

// setupAll sets up every scenario that is set up before the load (the payout
// and billing scenarios set themselves up when they run).
func (r *runner) setupAll(ctx context.Context) ([]*scenarioSetup, error) {
	o := r.o
	started := time.Now()
	var setups []*scenarioSetup
	for _, name := range o.Scenarios {
		var s *scenarioSetup
		var err error
		switch name {
		case ScenarioPayout, ScenarioBilling:
			continue // sets itself up when it runs (runPayoutFile, runBilling)
		case ScenarioSpread:
			s, err = r.setup(ctx, name, o.Merchants, o.Wallets, true)
		case ScenarioMerchant:
			s, err = r.setup(ctx, name, 1, merchantWallets, true)
		case ScenarioSTK:
			s, err = r.setupSTK(ctx, name, o.Merchants)
		case ScenarioWebhooks:
			s, err = r.setupWebhooks(ctx, name)
		case ScenarioMemory:
			s, err = r.setupMemory(ctx, name)
		default:
			s, err = r.setup(ctx, name, 1, o.HotSources+1, false)
		}
		if err != nil {
			return nil, fmt.Errorf("setup %s: %w", name, err)
		}
		setups = append(setups, s)
	}
	r.delta = make([]int64, len(r.wallets))
	r.printSetup(ctx, setups, time.Since(started))
	return setups, nil
}

func (r *runner) openLoopWorkers() int { return max(2*r.o.Concurrency, 64) }

func (r *runner) stopChild() {
	c := r.child
	r.child = nil
	if err := c.stop(); err != nil {
		r.printf("service stop: %v\n", err)
	}
	if n := c.logLines(); n > 0 {
		r.printf("service log (level warn): %d lines, last ones:\n%s\n", n, c.logTail(10))
	}
	if r.o.ServerCPUProfile != "" {
		r.printf("service CPU profile: %s (go tool pprof -top %s); allocations: %s.allocs (go tool pprof -sample_index=alloc_space -top %s.allocs)\n",
			r.o.ServerCPUProfile, r.o.ServerCPUProfile, r.o.ServerCPUProfile, r.o.ServerCPUProfile)
	}
}

// serverFigures is what the service's own metrics and the machine's CPU counters
// say about the measured part of a phase.
type serverFigures struct {
	OK            bool
	Seconds       float64
	BatchSize     histogram
	Commit        histogram
	CommitWait    histogram // a batch applied during a commit, from that commit's end to its own commit
	ApplyRounds   histogram // polls applied into each batch
	E2E           histogram
	HTTP          histogram
	BatchFailures float64
	ReplyTimeouts float64
	CPU           cpuUse
}

const transferRoute = `route="/api/v1/wallets/:wallet_id/intra_transfer"`

// observed runs a phase and scrapes the service's metrics (and CPU counters) at the
// end of its warmup and at its end, so the figures cover the measured part only.
func (r *runner) observed(ctx context.Context, warmup time.Duration, route string, run func() phaseResult) phaseResult {
	first := make(chan snap, 1)
	go func() {
		select {
		case <-time.After(warmup):
		case <-ctx.Done():
		}
		first <- r.snapshot(ctx)
	}()
	p := run()
	a := <-first
	p.Server = figuresBetween(a, r.snapshot(ctx), route)
	return p
}

// snap is one scrape of the service's metrics with the CPU counters at that time.
type snap struct {
	m   metrics
	cpu cpuTimes
	err error
}

func (r *runner) snapshot(ctx context.Context) snap {
	m, err := scrapeMetrics(ctx, r.http, r.admin)
	return snap{m: m, cpu: sampleCPU(m), err: err}
}

// figuresBetween is what happened between two snapshots; route selects the HTTP
// latency histogram (a route="..." label).
func figuresBetween(a, b snap, route string) serverFigures {
	if a.err != nil || b.err != nil {
		return serverFigures{}
	}
	f := serverFigures{OK: true, Seconds: b.cpu.At.Sub(a.cpu.At).Seconds()}
	diff := func(name string, labels ...string) histogram {
		return b.m.histogram(name, labels...).minus(a.m.histogram(name, labels...))
	}
	f.BatchSize = diff("paysvc_engine_batch_size_commands")
	f.Commit = diff("paysvc_engine_batch_commit_seconds")
	f.CommitWait = diff("paysvc_engine_commit_wait_seconds")
	f.ApplyRounds = diff("paysvc_engine_batch_apply_rounds")
	f.E2E = diff("paysvc_engine_command_end_to_end_seconds")
	f.HTTP = diff("paysvc_http_request_duration_seconds", route, `status="200"`)
	f.BatchFailures = b.m.sum("paysvc_engine_batch_failures_total") - a.m.sum("paysvc_engine_batch_failures_total")
	f.ReplyTimeouts = b.m.sum("paysvc_api_reply_timeouts_total") - a.m.sum("paysvc_api_reply_timeouts_total")
	f.CPU = cpuBetween(a.cpu, b.cpu)
	return f
}

func (r *runner) printMachine(ctx context.Context) error {
	var version string
	if err := r.db.GetContext(ctx, &version, `SELECT version()`); err != nil {
		return err
	}
	if i := strings.Index(version, " on "); i > 0 {
		version = version[:i]
	}
	host, _ := os.Hostname()
	procs := fmt.Sprintf("GOMAXPROCS %d (bench)", runtime.GOMAXPROCS(0))
	if m, err := scrapeMetrics(ctx, r.http, r.admin); err == nil && m.sum("go_sched_gomaxprocs_threads") > 0 {
		procs = fmt.Sprintf("GOMAXPROCS %d (bench) %.0f (service)", runtime.GOMAXPROCS(0), m.sum("go_sched_gomaxprocs_threads"))
	}
	r.printf("machine: %s, nproc %d, %s, %s %s/%s, %s\n",
		host, runtime.NumCPU(), procs, runtime.Version(), runtime.GOOS, runtime.GOARCH, version)
	return nil
}

func (r *runner) printSetup(ctx context.Context, setups []*scenarioSetup, took time.Duration) {
	var partitions int
	_ = r.db.GetContext(ctx, &partitions, `SELECT count(*) FROM partition_offsets WHERE topic = $1`, topics.CommandsTopic)
	r.printf("setup (%s, %s deposited in each funded wallet):\n", took.Round(time.Millisecond), r.o.Deposit)
	for _, s := range setups {
		ids := make(pq.StringArray, len(s.Merchants))
		for i, m := range s.Merchants {
			ids[i] = m.ID
		}
		// Merchants hash onto partitions, and two merchants on one partition share
		// its worker: how many workers a scenario really uses explains its figures.
		_ = r.db.GetContext(ctx, &s.Partitions, `SELECT count(DISTINCT kafka_partition) FROM processed_commands WHERE merchant_id = ANY($1)`, ids)
		used := s.Partitions
		if s.Memory {
			r.printMemorySetup(s)
			continue
		}
		if s.STK {
			r.printf("  %-16s %d merchants, KES %s STK pushes from random 2547XXXXXXXX phones (no magic suffix) to their settlement wallets; %s\n",
				s.Name, len(s.Merchants), stkAmount, r.stkDelays())
			continue
		}
		if s.Hot >= 0 {
			r.printf("  %-16s 1 merchant, %d funded source wallets -> 1 hot wallet; on %d of %d command partitions\n",
				s.Name, len(s.Sources), used, partitions)
		} else {
			r.printf("  %-16s %d merchants x %d wallets, all funded; on %d of %d command partitions\n",
				s.Name, len(s.Merchants), len(s.Merchants[0].Wallets), used, partitions)
		}
	}
}

func (r *runner) printPhase(p phaseResult) {
	switch p.Mode {
	case "closed":
		measured := fmt.Sprintf("%.1fs", p.Elapsed.Seconds())
		r.printf("\n%s: closed loop, concurrency %d, %s measured after %s warmup\n", p.Name, p.Concurrency, measured, r.o.Warmup)
	case "open":
		r.printf("\n%s at half the max rate: open loop at %.0f/s for %.1fs (latency from each request's scheduled time)\n",
			p.Name, p.Rate, p.Elapsed.Seconds())
	case "plainhttp":
		r.printf("\nplain HTTP + Postgres %s: closed loop, concurrency %d (the same client), one transaction per transfer on min(concurrency, --baseline-conns) connections, %.1fs measured\n",
			p.Name, p.Concurrency, p.Elapsed.Seconds())
	case "plain":
		trips := "two round trips per statement (lib/pq default)"
		if r.o.BaselineBinaryParameters {
			trips = "one round trip per statement"
		}
		r.printf("\nSQL loop without HTTP %s: %d connections, one transaction per transfer, %s, %.1fs measured\n",
			p.Name, p.Concurrency, trips, p.Elapsed.Seconds())
	}
	unit, endpoint := "transfers/s ", "intra_transfer"
	if p.Name == ScenarioSTK {
		unit, endpoint = "STK pushes/s", "mpesa-stk-push"
	}
	r.printf("  %s   %.0f  (%d ok measured, %d ok in warmup)\n", unit, p.throughput(), p.OK, p.WarmOK)
	r.printf("  latency        %s\n", p.Lat)
	if p.Mode == "open" {
		r.printf("  from send      %s (without the wait for a free sender)\n", p.SendLat)
	}
	r.printf("  errors         %s\n", p.Errors)
	for k, s := range p.Errors.Sample {
		r.printf("    e.g. %s: %s\n", k, strings.TrimSpace(s))
	}
	if n := p.WarmErrors.total(); n > 0 {
		r.printf("  warmup errors  %s\n", p.WarmErrors)
	}
	f := p.Server
	if !f.OK {
		return
	}
	batches := f.BatchSize.Count
	r.printf("  engine         %.0f batches (%.0f/s), commands per batch mean %.1f (p50 <= %g, p99 <= %g); commit mean %s ms (p99 <= %g ms)\n",
		batches, batches/f.Seconds, f.BatchSize.mean(), f.BatchSize.quantile(0.5), f.BatchSize.quantile(0.99),
		fmt.Sprintf("%.2f", f.Commit.mean()*1000), f.Commit.quantile(0.99)*1000)
	r.printf("  server side    %s 200 mean %.2f ms (p99 <= %g ms); command issued->committed mean %.2f ms (p99 <= %g ms)\n",
		endpoint, f.HTTP.mean()*1000, f.HTTP.quantile(0.99)*1000, f.E2E.mean()*1000, f.E2E.quantile(0.99)*1000)
	if p.Partitions > 0 && f.Seconds > 0 {
		r.printf("  commit share   CommitBatch took %.0f%% of the time of the %d partition worker(s) in use\n",
			100*f.Commit.Sum/f.Seconds/float64(p.Partitions), p.Partitions)
	}
	if f.CommitWait.Count > 0 && f.Seconds > 0 {
		r.printf("  pipeline       %.1f polls applied per partition batch; a batch applied during a commit waited %.2f ms after its end (%.0f%% of the time)\n",
			f.ApplyRounds.mean(), f.CommitWait.mean()*1000, 100*f.CommitWait.Sum/f.Seconds)
	}
	if f.BatchFailures > 0 || f.ReplyTimeouts > 0 {
		r.printf("  trouble        %.0f failed batches, %.0f reply timeouts\n", f.BatchFailures, f.ReplyTimeouts)
	}
	if f.CPU.OK {
		r.printf("  cpu (cores)    paysvc %.2f, postgres %.2f, bench %.2f, other %.2f; machine busy %.2f of %d\n",
			f.CPU.Server, f.CPU.Postgres, f.CPU.Bench, f.CPU.other(true), f.CPU.Busy, runtime.NumCPU())
		if tps := p.throughput(); tps > 0 && p.Name == ScenarioSTK {
			r.printf("  cpu/push       paysvc %.0f us, postgres %.0f us (the collections' ACCEPTED and FINAL results share this window)\n",
				1e6*f.CPU.Server/tps, 1e6*f.CPU.Postgres/tps)
		} else if tps > 0 {
			r.printf("  cpu/transfer   paysvc %.0f us, postgres %.0f us (2 cores at 10,000/s allow 200 us in all)\n",
				1e6*f.CPU.Server/tps, 1e6*f.CPU.Postgres/tps)
		}
	}
}

// printChecks runs both conservation checks and reports PASS or FAIL.
func (r *runner) printChecks(ctx context.Context) (bool, error) {
	if len(r.unknown) > 0 {
		n := len(r.unknown)
		resolved := r.resolveUnknown(ctx)
		r.printf("\nunknown outcomes: %d (no answer or 5xx); resolved by retrying with their Idempotency-Key: %d\n", n, resolved)
	}
	ledger, err := r.checkLedger(ctx)
	if err != nil {
		return false, err
	}
	model, err := r.checkModel(ctx)
	if err != nil {
		return false, err
	}
	verdict := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "FAIL"
	}
	r.printf("\nconservation\n")
	sums := make([]string, 0, len(ledger.CurrencySums))
	for cur, s := range ledger.CurrencySums {
		sums = append(sums, cur+" "+s.String())
	}
	slices.Sort(sums)
	r.printf("  ledger check   %s: %d entries, %d wallets, sums %s, %d snapshot mismatches, %d negative wallets, %d hold mismatches\n",
		verdict(ledger.OK), ledger.Entries, ledger.Wallets, strings.Join(sums, " "), len(ledger.WalletMismatch), len(ledger.NegativeWallets),
		len(ledger.HoldMismatches))
	if len(r.wallets) > 0 {
		r.printf("  model check    %s: %d bench wallets hold %s, deposited %s; %d wallets differ from deposit +/- the bench's 200 transfers\n",
			verdict(model.OK), model.Wallets, centsString(model.Balances), centsString(model.Deposited), len(model.Mismatches))
	}
	if model.Unknown > 0 {
		r.printf("    %d transfers have an unknown outcome (rerun with --idempotency-keys to resolve them)\n", model.Unknown)
	}
	for i, m := range model.Mismatches {
		if i == 10 {
			r.printf("    ... %d more\n", len(model.Mismatches)-10)
			break
		}
		r.printf("    %s\n", m)
	}
	stkOK := true
	if r.stk != nil {
		if stkOK, err = r.printSTKCheck(ctx, verdict); err != nil {
			return false, err
		}
	}
	hooksOK := r.printWebhookCheck(verdict)
	memOK := r.printMemoryCheck(verdict)
	return ledger.OK && model.OK && stkOK && hooksOK && memOK, nil
}

func (r *runner) runBaseline(ctx context.Context, dbURL string, setups []*scenarioSetup) (map[string]phaseResult, error) {
	conns := min(r.o.Concurrency, r.o.BaselineConns)
	if r.o.BaselineBinaryParameters {
		// lib/pq otherwise makes two round trips per statement (prepare, then
		// execute); pgx and most drivers make one. The baseline should be what a
		// competent plain service gets, not a handicapped one.
		dbURL = withQuery(dbURL, "binary_parameters", "yes")
	}
	db, err := sql.Open("postgres", mustSSL(dbURL))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(conns + 1)
	db.SetMaxIdleConns(conns + 1)
	t, shapes, err := r.setupPlain(ctx, db, setups)
	if err != nil {
		return nil, err
	}
	if r.o.URL != "" && !r.o.Keep {
		defer r.dropPlain(context.WithoutCancel(ctx), db, t)
	}
	out := map[string]phaseResult{}
	committed := 0
	for _, sh := range shapes {
		before := sampleCPU(nil)
		p, err := r.plainLoop(ctx, db, t, sh, conns, r.o.Warmup, r.o.Duration, r.o.Requests)
		if err != nil {
			return nil, err
		}
		// The warmup is inside this window, which the loaded steady state dominates.
		use := cpuBetween(before, sampleCPU(nil))
		out[sh.Name] = p
		committed += p.OK + p.WarmOK
		r.printPhase(p)
		if use.OK {
			r.printf("  cpu (cores)    postgres %.2f, bench %.2f, other %.2f; machine busy %.2f of %d (warmup included)\n",
				use.Postgres, use.Bench, use.other(false), use.Busy, runtime.NumCPU())
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	msg, ok, err := checkPlain(ctx, db, t, committed)
	if err != nil {
		return nil, err
	}
	r.printBaselineCheck(msg, ok)
	return out, nil
}

// printBaselineCheck prints the outcome of a baseline's own conservation check.
func (r *runner) printBaselineCheck(msg string, ok bool) {
	state := "PASS"
	if !ok {
		state = "FAIL (the baseline's own check; paysvc's checks are above)"
	}
	r.printf("  baseline check %s: %s\n", state, msg)
}

func withQuery(raw, k, v string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	q.Set(k, v)
	u.RawQuery = q.Encode()
	return u.String()
}

func mustSSL(u string) string {
	if s, err := storage.WithSSLMode(u); err == nil {
		return s
	}
	return u
}

func (r *runner) printTargets(res map[string]phaseResult, half *phaseResult, plain, plainHTTP map[string]phaseResult) {
	r.printf("\nsummary (targets from the issue)\n")
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	spread, hasSpread := res[ScenarioSpread]
	hot, hasHot := res[ScenarioHot]
	for _, name := range r.o.Scenarios {
		p := res[name]
		if name == ScenarioBilling {
			continue // billing-run prints its own target line (billing.go)
		}
		if name == ScenarioPayout {
			continue // its own lines follow (printPayoutTargets)
		}
		if name == ScenarioSTK {
			r.printf("  %-16s paysvc %7.0f STK pushes/s, %.0f collections completed/s end to end\n", name, p.throughput(), r.stk.rate())
			continue
		}
		if name == ScenarioWebhooks && r.webhooks != nil {
			r.printf("  %-16s paysvc %7.0f signed deliveries/s (backlog made at %.0f transfers/s)\n", name, r.webhooks.Steady, r.webhooks.GenRate)
			continue
		}
		if name == ScenarioMemory {
			r.printf("  %-16s paysvc %7.0f/s among the active wallets\n", name, p.throughput())
			continue
		}
		r.printf("%s\n", ratioLine(name, p, plainHTTP, plain))
	}
	if hasSpread {
		r.printf("  %-40s %-10s %s\n", fmt.Sprintf("transfer-spread >= %.0f/s", targetSpread),
			fmt.Sprintf("%.0f/s", spread.throughput()), met(spread.throughput() >= targetSpread))
	}
	if hasSpread && hasHot && spread.throughput() > 0 {
		ratio := hot.throughput() / spread.throughput()
		r.printf("  %-40s %-10s %s\n", fmt.Sprintf("transfer-hot >= %.1fx spread", targetHotRatio),
			fmt.Sprintf("%.2fx", ratio), met(ratio >= targetHotRatio))
	}
	if m, ok := res[ScenarioMerchant]; ok && hasSpread && spread.throughput() > 0 {
		ratio := m.throughput() / spread.throughput()
		r.printf("  %-40s %-10s %s\n", fmt.Sprintf("transfer-merchant >= %.1fx spread", targetMerchantRatio),
			fmt.Sprintf("%.2fx", ratio), met(ratio >= targetMerchantRatio))
	}
	if half != nil {
		r.printf("  %-40s %-10s %s\n", fmt.Sprintf("p99 <= %s at half the max rate", targetHalfRateP99),
			ms(half.Lat.P99)+" ms", met(half.Lat.N > 0 && half.Lat.P99 <= targetHalfRateP99))
	}
	r.printPlainHTTPTargets(res, plainHTTP, met)
	r.printMemoryTargets(met)
	r.printWebhookTargets(met)
	if p, ok := res[ScenarioSTK]; ok {
		rate := r.stk.rate()
		r.printf("  %-40s %-10s %s\n", fmt.Sprintf("stk-collect >= %.0f completed/s e2e", targetSTKRate),
			fmt.Sprintf("%.0f/s", rate), met(r.stk.Done && rate >= targetSTKRate))
		r.printf("  %-40s %-10s %s\n", fmt.Sprintf("stk-collect push p99 <= %s", targetSTKP99),
			ms(p.Lat.P99)+" ms", met(p.Lat.N > 0 && p.Lat.P99 <= targetSTKP99))
	}
}
