package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"paysvc/storage"
)

// Collections waiting in PROCESSING, refreshed by every rails instance (the role
// that brings their outcomes); alerts take the max over instances.
var (
	collectionsProcessing = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "paysvc_collections_processing_invoices",
		Help: "Collections of this environment waiting in PROCESSING for their rail's outcome (held and lost-without-reference invoices left out).",
	})
	collectionsProcessingOldest = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "paysvc_collections_processing_oldest_seconds",
		Help: "How long the oldest collection counted by paysvc_collections_processing_invoices has waited in PROCESSING.",
	})
)

// watchCollections refreshes the PROCESSING gauges every interval.
func watchCollections(ctx context.Context, db *sqlx.DB, environment string, interval time.Duration, log *slog.Logger) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		p, err := storage.ProcessingCollections(ctx, db, environment)
		switch {
		case err == nil:
			collectionsProcessing.Set(float64(p.Invoices))
			collectionsProcessingOldest.Set(p.Oldest.Seconds())
		case ctx.Err() == nil:
			log.Warn("collections in PROCESSING", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
