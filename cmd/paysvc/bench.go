package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"paysvc/cmd/paysvc/bench"
	"paysvc/cmd/paysvc/service"
)

const benchUsage = `usage: paysvc bench [flags]

Starts paysvc serve as a child process on a fresh database (paysvc_bench_<unix time>
on the server of PAYSVC_DATABASE_URL, dropped at the end unless --keep), sets up
merchants, wallets and deposits, drives intra-wallet transfers over HTTP, checks
conservation (exit status 1 if it fails), and compares with a plain Postgres loop.
See docs/benchmarks.md.

flags:
`

func benchCmd(ctx context.Context, cfg service.Config, log *slog.Logger, args []string, stdout io.Writer) error {
	if bench.IsChildCommand(args) {
		fs := flag.NewFlagSet("bench serve-profiled", flag.ContinueOnError)
		profile := fs.String("cpuprofile", "", "write the CPU profile here")
		if err := fs.Parse(args[1:]); err != nil || *profile == "" {
			return usageError{"usage: paysvc bench serve-profiled --cpuprofile FILE (started by paysvc bench --server-cpuprofile)"}
		}
		tuneGC()
		return bench.ServeProfiled(ctx, cfg, log, *profile)
	}
	if bench.IsBaselineServerCommand(args) {
		fs := flag.NewFlagSet("bench "+bench.BaselineServerCommand, flag.ContinueOnError)
		addr := fs.String("addr", "", "listen address")
		conns := fs.Int("conns", 16, "database connections")
		if err := fs.Parse(args[1:]); err != nil || *addr == "" || *conns < 1 {
			return usageError{"usage: paysvc bench " + bench.BaselineServerCommand + " --addr HOST:PORT [--conns N] (started by paysvc bench)"}
		}
		return bench.ServeBaseline(ctx, cfg.DatabaseURL, *addr, *conns, log)
	}
	o := bench.Options{DatabaseURL: cfg.DatabaseURL, Out: stdout, Log: log}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
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
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("bench: unexpected argument %q", fs.Arg(0))}
	}
	for _, s := range strings.Split(*scenarios, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.Scenarios = append(o.Scenarios, s)
		}
	}
	if err := o.Validate(); err != nil {
		return usageError{err.Error()}
	}
	return bench.Run(ctx, o)
}
