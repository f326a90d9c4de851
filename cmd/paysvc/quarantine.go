package main

import (
	"context"
	"flag"
	"io"

	"paysvc/cmd/paysvc/service"
	"paysvc/storage"
)

const quarantineUsage = "usage: paysvc quarantine list [--merchant ID] [--limit N]"

// quarantineCmd shows the commands the engine set aside because they failed on
// their own for a reason retrying cannot fix (ops/runbooks.md, "Quarantined
// commands"). Each was answered with a refusal and will never apply: an operator
// reads the error, fixes its cause, and asks the merchant (or the rail) to send it
// again as a new request.
func quarantineCmd(ctx context.Context, cfg service.Config, args []string, stdout, stderr io.Writer) error {
	if len(args) < 1 || args[0] != "list" {
		return usageError{quarantineUsage}
	}
	fs := flag.NewFlagSet("quarantine list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	merchant := fs.String("merchant", "", "only this merchant's commands")
	limit := fs.Int("limit", 100, "newest N commands")
	if err := fs.Parse(args[1:]); err != nil {
		return usageError{err.Error() + "\n" + quarantineUsage}
	}
	if fs.NArg() > 0 || *limit < 1 || *limit > 10000 {
		return usageError{quarantineUsage}
	}
	db, err := openMigrated(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := storage.QuarantinedCommands(ctx, db, *merchant, *limit)
	if err != nil {
		return err
	}
	return printJSON(stdout, map[string]any{"commands": rows})
}
