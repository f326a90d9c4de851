package main

import (
	"context"
	"errors"
	"io"
	"time"

	"paysvc/cmd/paysvc/service"
	"paysvc/storage"
)

func ledgerCheck(ctx context.Context, cfg service.Config, stdout io.Writer) error {
	db, err := storage.Open(ctx, cfg.DatabaseURL, 10*time.Second)
	if err != nil {
		return err
	}
	defer db.Close()
	r, err := storage.CheckLedger(ctx, db)
	if err != nil {
		return err
	}
	if err := printJSON(stdout, r); err != nil {
		return err
	}
	if !r.OK {
		return errors.New("ledger check failed")
	}
	return nil
}
