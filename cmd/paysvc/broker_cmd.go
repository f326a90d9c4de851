package main

import (
	"context"
	"flag"
	"io"
	"log/slog"

	"paysvc/cmd/paysvc/service"
)

// brokerCmd runs the embedded Kafka broker (kfake) as a process of its own, so that
// `make cluster` and the cluster test can run several paysvc processes on one
// broker and kill that broker like any other process. Development only: compose
// runs Apache Kafka (docs/operations.md says what differs).
func brokerCmd(ctx context.Context, cfg service.Config, log *slog.Logger, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	port := fs.Int("port", cfg.KafkaPort, "port on 127.0.0.1 (default $PAYSVC_KAFKA_PORT or 9092)")
	dir := fs.String("data-dir", cfg.DataDir, "data directory; the log is kept in its kafka/, as `serve` keeps it (default $PAYSVC_DATA_DIR or .data)")
	sync := fs.Bool("sync", cfg.KafkaSyncWrites, "fsync every produced batch (default $PAYSVC_KAFKA_SYNC_WRITES)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return usageError{"usage: paysvc broker [--port N] [--data-dir DIR] [--sync]"}
	}
	cfg.KafkaPort, cfg.KafkaSyncWrites, cfg.DataDir = *port, *sync, *dir
	if err := cfg.Validate(); err != nil {
		return err
	}
	c, err := service.StartBroker(cfg, log)
	if err != nil {
		return err
	}
	<-ctx.Done()
	// Close writes kfake's snapshots and group members, so a clean restart skips
	// the segment replay a SIGKILLed broker needs.
	log.Info("broker shutting down")
	c.Close()
	return nil
}
