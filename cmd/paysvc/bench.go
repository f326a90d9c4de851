package main

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"paysvc/cmd/paysvc/service"
)

func benchCmd(ctx context.Context, cfg service.Config, log *slog.Logger, args []string, stdout io.Writer) error {
	return errors.New("bench: not built yet")
}
