// Command paysvc-bench is the load generator behind `make bench`, `make
// bench-memory` and the figures in docs/benchmarks.md (package bench). It is a
// command of its own so that the service binary, paysvc, carries none of it: the
// bench runs that binary as its child, as it ships. `paysvc-bench chart` makes
// docs/benchmarks.md's table and chart from the current figures,
// docs/benchmarks.tsv (package chart).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"paysvc/cmd/paysvc-bench/bench"
	"paysvc/cmd/paysvc-bench/chart"
	"paysvc/cmd/paysvc/service"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "paysvc-bench:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// run reads the service's configuration as paysvc does (the bench database's
// server, and the profiled child's settings) and runs the bench.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "chart" {
		return chartCmd(args[1:], stdout)
	}
	cfg, err := service.FromEnv(getenv)
	if err != nil {
		return err
	}
	log := service.NewLogger(cfg, stderr)
	return benchCmd(ctx, cfg, log, args, stdout)
}

const benchUsage = `usage: paysvc-bench [flags]

Starts paysvc serve (the binary of --paysvc, by default bin/paysvc next to this one)
as a child process on a fresh database (paysvc_bench_<unix time>
on the server of PAYSVC_DATABASE_URL, dropped at the end unless --keep), sets up
merchants, wallets and deposits, drives intra-wallet transfers over HTTP, checks
conservation (exit status 1 if it fails), and compares with a plain Postgres loop.
See docs/benchmarks.md.

paysvc-bench chart [--in F] [--out PNG] [--md PAGE] draws the chart of the current
figures and rewrites the page's table from them (no service, no database).

flags:
`

func benchCmd(ctx context.Context, cfg service.Config, log *slog.Logger, args []string, stdout io.Writer) error {
	if bench.IsChildCommand(args) {
		fs := flag.NewFlagSet("bench serve-profiled", flag.ContinueOnError)
		profile := fs.String("cpuprofile", "", "write the CPU profile here")
		if err := fs.Parse(args[1:]); err != nil || *profile == "" {
			return usageError{"usage: paysvc-bench serve-profiled --cpuprofile FILE (started by paysvc-bench --server-cpuprofile)"}
		}
		service.TuneGC()
		return bench.ServeProfiled(ctx, cfg, log, *profile)
	}
	if bench.IsBaselineServerCommand(args) {
		fs := flag.NewFlagSet(bench.BaselineServerCommand, flag.ContinueOnError)
		addr := fs.String("addr", "", "listen address")
		conns := fs.Int("conns", 16, "database connections")
		if err := fs.Parse(args[1:]); err != nil || *addr == "" || *conns < 1 {
			return usageError{"usage: paysvc-bench " + bench.BaselineServerCommand + " --addr HOST:PORT [--conns N] (started by paysvc-bench)"}
		}
		return bench.ServeBaseline(ctx, cfg.DatabaseURL, *addr, *conns, log)
	}
	o := bench.Options{DatabaseURL: cfg.DatabaseURL, Out: stdout, Log: log}
	fs := flag.NewFlagSet("paysvc-bench", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprint(stdout, benchUsage)
		fs.PrintDefaults()
	}
	scenarios := fs.String("scenario", strings.Join(bench.Scenarios, ","), bench.ScenarioHelp())
	fs.IntVar(&o.Merchants, "merchants", 8, "transfer-spread and stk-collect: merchants")
	fs.IntVar(&o.Wallets, "wallets", 16, "transfer-spread: wallets per merchant")
	fs.IntVar(&o.HotSources, "hot-sources", 64, "transfer-hot: funded wallets the transfers come from (all credit one hot wallet)")
	fs.IntVar(&o.Concurrency, "concurrency", 64, "concurrent HTTP clients (closed loop), each on a kept-alive connection")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "measured time per scenario")
	fs.IntVar(&o.Requests, "requests", 0, "measure this many requests per scenario instead of --duration")
	fs.DurationVar(&o.Warmup, "warmup", 2*time.Second, "unmeasured load before each scenario")
	fs.DurationVar(&o.HalfRateDuration, "half-rate-duration", 5*time.Second, "open-loop phase at half the transfer-spread rate (0 skips it)")
	fs.Float64Var(&o.OpenRate, "open-rate", 0, "transfers/s of the open-loop phase instead of half the measured spread rate (compares binaries at one load; the p99 target is judged at half the max rate)")
	fs.BoolVar(&o.Baseline, "baseline", true, "also run the plain HTTP + Postgres service on the transfer scenarios, same client (--baseline=false skips it)")
	fs.BoolVar(&o.SQLLoop, "baseline-sql-loop", false, "also run the in-process SQL loop without HTTP (not comparable with paysvc: no HTTP)")
	fs.IntVar(&o.BaselineConns, "baseline-conns", 16, "baseline Postgres connections: min(--concurrency, this); more make one-row-hot Postgres slower")
	fs.BoolVar(&o.BaselineBinaryParameters, "baseline-binary-parameters", true, "plain loop: one round trip per statement (lib/pq binary_parameters, as pgx does); false: lib/pq's two")
	fs.StringVar(&o.Deposit, "deposit", "1000000.00", "amount deposited in each funded wallet")
	fs.BoolVar(&o.IdempotencyKeys, "idempotency-keys", false, "send an Idempotency-Key with every transfer (measures that path; lets unknown outcomes be resolved)")
	fs.BoolVar(&o.Keep, "keep", false, "keep the bench database, the service's data dir and log")
	fs.StringVar(&o.Service, "paysvc", "", "the paysvc binary the bench starts as its service (default: paysvc in this binary's directory, bin/paysvc under make bench)")
	fs.StringVar(&o.URL, "url", "", "bench an already running service at this base URL instead (PAYSVC_DATABASE_URL must be its database)")
	fs.StringVar(&o.MetricsURL, "metrics-url", "http://"+service.DefaultAdminAddr, "with --url: the service's operator listener (PAYSVC_ADMIN_ADDR), where /metrics is scraped")
	fs.StringVar(&o.ServerCPUProfile, "server-cpuprofile", "", "write a CPU profile of the service process to this file")
	fs.BoolVar(&o.Progress, "progress", false, "print the successful transfers of each second during the load phases")
	fs.Uint64Var(&o.Seed, "seed", 0, "random seed for the choice of wallets and amounts (0: from the clock)")
	fs.IntVar(&o.Subscriptions, "subscriptions", 100000, "billing-run: ACTIVE subscriptions seeded due at the same instant")
	fs.IntVar(&o.WebhookBacklog, "webhook-backlog", 30000, "webhooks: transfers made before the dispatcher starts (its throughput phase)")
	fs.IntVar(&o.MemoryWallets, "memory-wallets", 1000000, "wallets-1m: wallets seeded in the bench database")
	fs.IntVar(&o.MemoryActive, "memory-active", 10000, "wallets-1m: funded wallets the first phase's transfers use")
	fs.DurationVar(&o.MemoryIdleWait, "memory-idle-wait", 45*time.Second, "wallets-1m: time without load after the transfers, for passivation (0 skips it)")
	fs.Float64Var(&o.WebhookRate, "webhook-rate", 0, "webhooks: open-loop transfers/s while the dispatcher runs (latency phase; 0: half the backlog's rate)")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	for _, s := range strings.Split(*scenarios, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.Scenarios = append(o.Scenarios, s)
		}
	}
	if err := o.Validate(); err != nil {
		return usageError{err.Error()}
	}
	if o.URL == "" {
		var err error
		if o.Service, err = servicePath(o.Service); err != nil {
			return err
		}
	}
	return bench.Run(ctx, o)
}

// servicePath is the paysvc binary to start: flag, else the paysvc beside this
// binary (make build and make bench put both in bin/). It must exist now, so a
// missing build is named before a database is created.
func servicePath(flagValue string) (string, error) {
	p := flagValue
	if p == "" {
		self, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("find own binary: %w", err)
		}
		p = filepath.Join(filepath.Dir(self), "paysvc")
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(abs); err != nil || st.IsDir() {
		return "", fmt.Errorf("the service binary %s is not there (make build, or --paysvc PATH)", abs)
	}
	return abs, nil
}

const chartUsage = `usage: paysvc-bench chart [--in docs/benchmarks.tsv] [--out docs/img/benchmarks.png] [--md docs/benchmarks.md]

Reads the current figures (the data file), writes their bar chart as a PNG and
rewrites the table between the figures markers of the Markdown page, so the page,
the picture and the data agree. --md "" leaves the page alone.

flags:
`

// chartCmd makes docs/benchmarks.md's chart and table from its data file. It
// needs no configuration: it runs before the service's environment is read.
func chartCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("paysvc-bench chart", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprint(stdout, chartUsage)
		fs.PrintDefaults()
	}
	in := fs.String("in", "docs/benchmarks.tsv", "the figures: tab-separated, one scenario a line")
	out := fs.String("out", "docs/img/benchmarks.png", "the chart to write")
	md := fs.String("md", "docs/benchmarks.md", "the page whose figures table is rewritten (empty: none)")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	data, err := os.Open(*in)
	if err != nil {
		return err
	}
	rows, err := chart.Read(data)
	data.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	pic, err := chart.PNG(rows)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, pic, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (%d scenarios)\n", *out, len(rows))
	if *md == "" {
		return nil
	}
	page, err := os.ReadFile(*md)
	if err != nil {
		return err
	}
	updated, err := chart.WithTable(string(page), rows)
	if err != nil {
		return fmt.Errorf("%s: %w", *md, err)
	}
	if err := os.WriteFile(*md, []byte(updated), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "rewrote the figures table of %s\n", *md)
	return nil
}

// parseFlags parses args, which take no positional arguments; help reports that
// -h asked for the usage, which the flag set has printed, and so nothing more runs.
func parseFlags(fs *flag.FlagSet, args []string) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return true, nil
		}
		return false, usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return false, usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	return false, nil
}
