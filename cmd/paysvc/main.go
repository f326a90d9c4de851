// Command paysvc is the payments, payouts and wallets service: one binary whose
// `serve` runs the five roles (api, engine, relay, rails, dispatcher; all by
// default, any subset with --roles or PAYSVC_ROLES), plus admin subcommands.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"paysvc/cmd/paysvc/service"
	"paysvc/storage"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "paysvc:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

const usage = `usage: paysvc <command> [flags]

commands:
  serve [--roles api,engine,relay,rails,dispatcher]
                                           run the service (all roles by default)
  broker [--port N] [--data-dir DIR]      the embedded Kafka broker alone (development: make cluster)
  migrate                                  apply database migrations
  merchant create --name NAME [--environment sandbox|live] [--email ADDRESS]
                                           (admin commands: merchant, key, payout, quarantine;
                                           they refuse a schema older or newer than this
                                           binary, and migrate only with --migrate)
  merchant list [--environment sandbox|live]  every merchant: id, name, environment, enabled
  merchant disable|enable MERCHANT_ID
  merchant email MERCHANT_ID ADDRESS       where webhook failure warnings go ("" clears)
  key create --merchant ID --permissions view_wallets,add_files,...
                                           a restricted secret key (docs/security.md lists them)
  key create --merchant ID --unrestricted  another secret key that may do everything
  key list --merchant ID                   the merchant's keys (id, kind, permissions, revoked;
                                           never a key)
  key revoke KEYPREFIX
  ledger check                             verify the ledger balances and wallet snapshots
  listen --forward-to URL [--events T,...] stream the sandbox's events to a local URL, signed
  listen --print                           ... or print them, one JSON line each
  trigger TOPIC                            send a sample event of a topic (sandbox)
  replay EVENT_ID                          resend a webhook event's exact bytes (a secret key)
  payout finish TXN --status COMPLETE|FAILED  finish a payout whose outcome the rail never reported
  payout hold|release FILE [--reason TEXT]  pause or resume sending a payment file (kill switch)
  payout fail FILE --reason TEXT           fail a file's unsent payouts, releasing their hold
  quarantine list [--merchant ID]          commands the engine set aside (refused; see ops/runbooks.md)
  version                                  the build: module version, commit, Go
  probe [--addr ADDR] [PATH...]            exit 0 when the operator listener answers 200 on each path
                                           (default /livez /readyz; for container healthchecks)

Configuration comes from PAYSVC_* environment variables (see README.md).`

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) < 2 {
		return usageError{usage}
	}
	switch args[1] {
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, usage) // even with a broken configuration
		return nil
	case "version", "--version":
		fmt.Fprintln(stdout, version())
		return nil
	}
	cfg, err := service.FromEnv(getenv)
	if err != nil {
		return err
	}
	log := service.NewLogger(cfg, stderr)
	// Only the names of the process's variables are read here, to warn about
	// one nothing reads; the configuration itself comes from getenv alone.
	warnUnknown(log, os.Environ())
	cmd, rest := args[1], args[2:]
	switch cmd {
	case "merchant", "key", "payout", "quarantine":
		// Admin commands migrate only when asked (openMigrated).
		var asked bool
		if rest, asked = takeMigrate(rest); asked {
			ctx = withMigrate(ctx)
		}
	}
	switch cmd {
	case "serve":
		return serve(ctx, cfg, log, rest, stderr)
	case "broker":
		return brokerCmd(ctx, cfg, log, rest, stderr)
	case "migrate":
		db, err := storage.Open(ctx, cfg.DatabaseURL, 30*time.Second)
		if err != nil {
			return err
		}
		defer db.Close()
		p := newProgress(stderr)
		m, err := storage.MigrateProgress(ctx, db, p.line)
		p.end()
		if err != nil {
			return err
		}
		// stdout stays the versions alone (scripts read it); the function files
		// are the operator's to see (ops/runbooks.md, upgrades-and-rollback).
		if m.SchemaAhead {
			log.Warn("the schema is newer than this binary: function files left as they are")
		} else if len(m.Functions) > 0 {
			log.Info("function files applied", "files", m.Functions)
		}
		return printJSON(stdout, map[string]any{"applied": m.Versions})
	case "merchant":
		return merchantCmd(ctx, cfg, rest, stdout, stderr)
	case "key":
		return keyCmd(ctx, cfg, rest, stdout, stderr)
	case "ledger":
		if len(rest) != 1 || rest[0] != "check" {
			return usageError{"usage: paysvc ledger check"}
		}
		return ledgerCheck(ctx, cfg, stdout, stderr)
	case "bench":
		// The load generator is its own command, so this binary carries none of it.
		return usageError{"paysvc bench is now its own command: paysvc-bench (make bench builds bin/paysvc-bench; see docs/benchmarks.md)"}
	case "listen":
		return listenCmd(ctx, cfg, rest, getenv, stdout, stderr)
	case "trigger":
		return triggerCmd(ctx, cfg, rest, getenv, stdout, stderr)
	case "replay":
		return replayCmd(ctx, cfg, rest, getenv, stdout, stderr)
	case "payout":
		return payoutCmd(ctx, cfg, rest, stdout, stderr)
	case "quarantine":
		return quarantineCmd(ctx, cfg, rest, stdout, stderr)
	case "probe":
		return probeCmd(ctx, cfg, rest, stdout, stderr)
	default:
		return usageError{fmt.Sprintf("unknown command %q\n\n%s", cmd, usage)}
	}
}

func serve(ctx context.Context, cfg service.Config, log *slog.Logger, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	roles := fs.String("roles", strings.Join(cfg.Roles, ","), "roles to run: api, engine, relay, rails, dispatcher")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	cfg.Roles = strings.Split(*roles, ",")
	if err := cfg.Validate(); err != nil {
		return err
	}
	service.TuneGC()
	log.Info("configuration", "config", cfg.Redacted())
	svc, err := service.Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	<-ctx.Done()
	log.Info("shutting down")
	svc.Close()
	return nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	return enc.Encode(v)
}

// warnUnknown logs each PAYSVC_ variable of environ that paysvc does not read,
// with the name it was probably meant to be: a misspelt setting otherwise keeps
// its default in silence.
func warnUnknown(log *slog.Logger, environ []string) {
	for _, u := range service.UnknownVariables(environ) {
		if u.DidYouMean != "" {
			log.Warn("unknown configuration variable: nothing reads it", "variable", u.Name, "did_you_mean", u.DidYouMean)
		} else {
			log.Warn("unknown configuration variable: nothing reads it", "variable", u.Name)
		}
	}
}

// version describes the build from what the Go toolchain stamped into it.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "paysvc (no build information)"
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	out := "paysvc " + bi.Main.Version
	if rev := settings["vcs.revision"]; rev != "" {
		out += " commit " + rev
		if settings["vcs.modified"] == "true" {
			out += " (modified)"
		}
		if at := settings["vcs.time"]; at != "" {
			out += " " + at
		}
	}
	return out + " " + bi.GoVersion + " " + settings["GOOS"] + "/" + settings["GOARCH"]
}
