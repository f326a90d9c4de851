package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"paysvc/cmd/paysvc/admin"
	"paysvc/cmd/paysvc/service"
	"paysvc/storage"
)

func merchantCmd(ctx context.Context, cfg service.Config, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{"usage: paysvc merchant create|disable|enable ..."}
	}
	db, err := storage.Open(ctx, cfg.DatabaseURL, 10*time.Second)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := storage.Migrate(ctx, db); err != nil {
		return err
	}
	switch args[0] {
	case "create":
		fs := flag.NewFlagSet("merchant create", flag.ContinueOnError)
		name := fs.String("name", "", "merchant name")
		env := fs.String("environment", cfg.Environment, "sandbox or live (keys are bound to it)")
		if err := fs.Parse(args[1:]); err != nil {
			return usageError{err.Error()}
		}
		created, err := admin.CreateMerchant(ctx, db, *name, *env)
		if err != nil {
			return err
		}
		return printJSON(stdout, created)
	case "disable", "enable":
		if len(args) != 2 {
			return usageError{"usage: paysvc merchant " + args[0] + " MERCHANT_ID"}
		}
		ok, err := storage.SetMerchantEnabled(ctx, db, args[1], args[0] == "enable")
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("merchant %q not found", args[1])
		}
		return printJSON(stdout, map[string]any{"merchant_id": args[1], "enabled": args[0] == "enable"})
	}
	return usageError{"usage: paysvc merchant create|disable|enable ..."}
}

func keyCmd(ctx context.Context, cfg service.Config, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{"usage: paysvc key create|revoke ..."}
	}
	db, err := storage.Open(ctx, cfg.DatabaseURL, 10*time.Second)
	if err != nil {
		return err
	}
	defer db.Close()
	switch args[0] {
	case "create":
		fs := flag.NewFlagSet("key create", flag.ContinueOnError)
		merchant := fs.String("merchant", "", "merchant id")
		perms := fs.String("permissions", "", "comma-separated: add_files, view_files, change_files")
		if err := fs.Parse(args[1:]); err != nil {
			return usageError{err.Error()}
		}
		var list []string
		for _, p := range strings.Split(*perms, ",") {
			if p = strings.TrimSpace(p); p != "" {
				list = append(list, p)
			}
		}
		k, err := admin.CreateKey(ctx, db, *merchant, list)
		if err != nil {
			return err
		}
		return printJSON(stdout, k)
	case "revoke":
		if len(args) != 2 || len(args[1]) < 16 {
			return usageError{"usage: paysvc key revoke KEYPREFIX (the key id printed at creation, or more of the key)"}
		}
		id, err := storage.RevokeKey(ctx, db, args[1])
		if errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("no live key starts with %q", args[1])
		}
		if err != nil {
			return err
		}
		return printJSON(stdout, map[string]string{"revoked": id})
	}
	return usageError{"usage: paysvc key create|revoke ..."}
}
