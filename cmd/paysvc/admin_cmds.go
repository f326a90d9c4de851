package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"paysvc/cmd/paysvc/admin"
	"paysvc/cmd/paysvc/service"
	"paysvc/storage"
)

// keyRef is what `key revoke` accepts: at least a key id's worth of the key (the
// prefix and 8 or more of its random hex characters), never a bare prefix.
var keyRef = regexp.MustCompile(`^IS(SecretKey|PubKey)_(test|live)_[0-9a-f]{8,}$`)

// openMigrated opens the database for an admin command. It migrates only when
// the command line asked (--migrate): pointed at production by mistake, an admin
// command must not change its schema. A schema older or newer than this binary
// is refused, saying which and what to run, since the command's SQL is written
// for this binary's schema.
func openMigrated(ctx context.Context, cfg service.Config) (*sqlx.DB, error) {
	db, err := storage.Open(ctx, cfg.DatabaseURL, 10*time.Second)
	if err != nil {
		return nil, err
	}
	if migrateAsked(ctx) {
		if _, err := storage.Migrate(ctx, db); err != nil {
			db.Close()
			return nil, err
		}
	}
	st, err := storage.ReadSchemaState(ctx, db)
	if err == nil {
		err = schemaFits(st)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// schemaFits refuses a schema this binary's commands are not written for.
func schemaFits(st storage.SchemaState) error {
	switch {
	case st.Ahead():
		return fmt.Errorf("the database schema is at migration %d, newer than this binary's %d: use the paysvc release that migrated it", st.Head, st.Embedded)
	case len(st.Pending) > 0 && st.Head == 0:
		return fmt.Errorf("the database has no paysvc schema (this binary's is migration %d): run `paysvc migrate`, or add --migrate", st.Embedded)
	case len(st.Pending) > 0:
		return fmt.Errorf("the database schema is at migration %d, older than this binary's %d (%d pending): run `paysvc migrate`, or add --migrate",
			st.Head, st.Embedded, len(st.Pending))
	}
	return nil
}

type migrateKey struct{}

// withMigrate and migrateAsked carry the command line's --migrate to
// openMigrated, which every admin command calls.
func withMigrate(ctx context.Context) context.Context {
	return context.WithValue(ctx, migrateKey{}, true)
}

func migrateAsked(ctx context.Context) bool { v, _ := ctx.Value(migrateKey{}).(bool); return v }

// takeMigrate removes --migrate from an admin command's arguments, wherever it
// stands, so each command's own flag set need not know it.
func takeMigrate(args []string) ([]string, bool) {
	out := make([]string, 0, len(args))
	asked := false
	for _, a := range args {
		if a == "--migrate" || a == "-migrate" {
			asked = true
			continue
		}
		out = append(out, a)
	}
	return out, asked
}

// Arguments are checked before the database is touched: a usage error changes nothing.
func merchantCmd(ctx context.Context, cfg service.Config, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{"usage: paysvc merchant create|list|disable|enable|email ..."}
	}
	switch args[0] {
	case "list":
		fs := flag.NewFlagSet("merchant list", flag.ContinueOnError)
		fs.SetOutput(stderr)
		env := fs.String("environment", "", "sandbox or live (default: both)")
		if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 {
			return usageError{"usage: paysvc merchant list [--environment sandbox|live]"}
		}
		if *env != "" && *env != "sandbox" && *env != "live" {
			return usageError{"--environment: sandbox or live"}
		}
		db, err := openMigrated(ctx, cfg)
		if err != nil {
			return err
		}
		defer db.Close()
		list, err := storage.ListMerchants(ctx, db, *env)
		if err != nil {
			return err
		}
		return printJSON(stdout, map[string]any{"merchants": nonNil(list)})
	case "create":
		fs := flag.NewFlagSet("merchant create", flag.ContinueOnError)
		fs.SetOutput(stderr)
		name := fs.String("name", "", "merchant name")
		env := fs.String("environment", cfg.Environment, "sandbox or live (keys are bound to it)")
		email := fs.String("email", "", "where the merchant's operational mail goes (webhook failure warnings)")
		if err := fs.Parse(args[1:]); err != nil {
			return usageError{err.Error()}
		}
		if *email != "" && !validEmail(*email) {
			return usageError{"--email: not an email address"}
		}
		db, err := openMigrated(ctx, cfg)
		if err != nil {
			return err
		}
		defer db.Close()
		created, err := admin.CreateMerchant(ctx, db, *name, *env)
		if err != nil {
			return err
		}
		if *email != "" {
			if _, err := storage.SetMerchantEmail(ctx, db, created.MerchantID, *email); err != nil {
				return err
			}
		}
		return printJSON(stdout, created)
	case "email":
		if len(args) != 3 || (args[2] != "" && !validEmail(args[2])) {
			return usageError{"usage: paysvc merchant email MERCHANT_ID ADDRESS (\"\" clears it)"}
		}
		db, err := openMigrated(ctx, cfg)
		if err != nil {
			return err
		}
		defer db.Close()
		ok, err := storage.SetMerchantEmail(ctx, db, args[1], args[2])
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("merchant %q not found", args[1])
		}
		return printJSON(stdout, map[string]any{"merchant_id": args[1], "email": args[2]})
	case "disable", "enable":
		if len(args) != 2 {
			return usageError{"usage: paysvc merchant " + args[0] + " MERCHANT_ID"}
		}
		db, err := openMigrated(ctx, cfg)
		if err != nil {
			return err
		}
		defer db.Close()
		ok, err := storage.SetMerchantEnabled(ctx, db, args[1], args[0] == "enable")
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("merchant %q not found", args[1])
		}
		return printJSON(stdout, map[string]any{"merchant_id": args[1], "enabled": args[0] == "enable"})
	}
	return usageError{"usage: paysvc merchant create|list|disable|enable|email ..."}
}

// nonNil prints an empty list as [], not null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// validEmail is a sanity check (one @, a dot in the domain, no spaces or angle
// brackets), not RFC 5322: the mail server has the last word.
func validEmail(s string) bool {
	at := strings.Index(s, "@")
	return len(s) <= 254 && at > 0 && at == strings.LastIndex(s, "@") && strings.Contains(s[at:], ".") &&
		!strings.ContainsAny(s, " \t\r\n<>,;")
}

func keyCmd(ctx context.Context, cfg service.Config, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{"usage: paysvc key create|list|revoke ..."}
	}
	switch args[0] {
	case "list":
		fs := flag.NewFlagSet("key list", flag.ContinueOnError)
		fs.SetOutput(stderr)
		merchant := fs.String("merchant", "", "merchant id (required)")
		if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 || *merchant == "" {
			return usageError{"usage: paysvc key list --merchant ID"}
		}
		db, err := openMigrated(ctx, cfg)
		if err != nil {
			return err
		}
		defer db.Close()
		if ok, err := storage.MerchantExists(ctx, db, *merchant); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("merchant %q not found", *merchant)
		}
		list, err := storage.ListKeys(ctx, db, *merchant)
		if err != nil {
			return err
		}
		return printJSON(stdout, map[string]any{"merchant_id": *merchant, "keys": nonNil(list)})
	case "create":
		fs := flag.NewFlagSet("key create", flag.ContinueOnError)
		fs.SetOutput(stderr)
		merchant := fs.String("merchant", "", "merchant id")
		perms := fs.String("permissions", "", "comma-separated, from docs/security.md: view_wallets, add_transfers, add_files, approve_files, ...")
		unrestricted := fs.Bool("unrestricted", false, "a key that may do everything, like the one made with the merchant (instead of --permissions)")
		if err := fs.Parse(args[1:]); err != nil {
			return usageError{err.Error()}
		}
		if *unrestricted && strings.TrimSpace(*perms) != "" {
			return usageError{"key create: --unrestricted or --permissions, not both"}
		}
		var list []string
		for _, p := range strings.Split(*perms, ",") {
			if p = strings.TrimSpace(p); p != "" {
				list = append(list, p)
			}
		}
		db, err := openMigrated(ctx, cfg)
		if err != nil {
			return err
		}
		defer db.Close()
		create := func() (admin.Key, error) { return admin.CreateKey(ctx, db, *merchant, list) }
		if *unrestricted {
			create = func() (admin.Key, error) { return admin.CreateUnrestrictedKey(ctx, db, *merchant) }
		}
		k, err := create()
		if err != nil {
			return err
		}
		return printJSON(stdout, k)
	case "revoke":
		if len(args) != 2 || !keyRef.MatchString(args[1]) {
			return usageError{"usage: paysvc key revoke KEYPREFIX (the key id printed at creation, or the whole key)"}
		}
		db, err := openMigrated(ctx, cfg)
		if err != nil {
			return err
		}
		defer db.Close()
		id, err := storage.RevokeKey(ctx, db, args[1])
		if errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("no live key starts with %q", args[1])
		}
		if err != nil {
			return err
		}
		return printJSON(stdout, map[string]string{"revoked": id})
	}
	return usageError{"usage: paysvc key create|list|revoke ..."}
}
