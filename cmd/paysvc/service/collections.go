package service

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"paysvc/actors/values/every"
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

// watchCollections refreshes the PROCESSING gauges at once and then every
// interval (the job every.CollectionsProcessing).
func watchCollections(ctx context.Context, db *sqlx.DB, environment string, interval time.Duration, log *slog.Logger) error {
	return every.Run(ctx, log, every.Job{Name: every.CollectionsProcessing, Interval: interval, AtStart: true, Run: func(ctx context.Context) error {
		p, err := storage.ProcessingCollections(ctx, db, environment)
		if err != nil {
			return fmt.Errorf("collections in PROCESSING: %w", err)
		}
		collectionsProcessing.Set(float64(p.Invoices))
		collectionsProcessingOldest.Set(p.Oldest.Seconds())
		return nil
	}})
}
