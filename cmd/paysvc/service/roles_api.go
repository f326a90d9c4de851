package service

import (
	"context"
	"net/http"
	"time"

	"paysvc/actors/engine/replies"
	"paysvc/actors/rails/mpesa"
	"paysvc/api"
	"paysvc/storage"
)

// startAPI starts the API role behind the public listener: the hub where
// requests wait for their commands' replies (and the reader of the replies
// topic for those applied elsewhere), the idempotency store on a connection
// that commits without waiting for the disk, its pruning, and the pay-request
// reminders. It runs after listenPublic: its links carry the public base URL.
func (st *starter) startAPI(ctx context.Context) (err error) {
	s, cfg, log := st.Service, st.cfg, st.Log
	s.hub = replies.NewHub(cfg.InstanceID)
	remote, err := replies.NewRemote(ctx, s.Brokers, cfg.KafkaNamespace, s.hub, s.producer, log)
	if err != nil {
		return err
	}
	s.goRun(func() error { return remote.Run(st.run) })
	idemURL, err := storage.WithParam(cfg.DatabaseURL, "synchronous_commit", "off")
	if err != nil {
		return err
	}
	_, idemConns := cfg.DBPools()
	if s.idemDB, err = storage.OpenPool(ctx, idemURL, 30*time.Second, storage.Pool{MaxConns: idemConns, Log: log}); err != nil {
		return err
	}
	s.goRun(func() error {
		return pruneIdempotency(st.run, s.idemDB, cfg.Retention.Interval, cfg.API.IdempotencyTTL, log)
	})
	deps := api.Deps{DB: s.DB, IdempotencyDB: s.idemDB, Kafka: s.producer, Brokers: s.Brokers, Namespace: cfg.KafkaNamespace, Hub: s.hub, Log: log,
		Ready: s.ready.Load, Mailer: st.mailer, Sink: s.sink}
	if cfg.Daraja.ConsumerKey != "" {
		// The second proof of an STK callback without a valid MAC (callbacks.go).
		// A process without the rails role may lack the callback base URL, which the
		// query does not use: then it cannot confirm, and such callbacks change nothing.
		if d, err := mpesa.NewDaraja(cfg.Daraja, &http.Client{Timeout: 15 * time.Second}); err != nil {
			log.Error("api role: no Daraja status query; STK callbacks without a valid MAC will change nothing", "err", err)
		} else {
			deps.STKQuery = d
		}
	}
	a := api.New(cfg.API, deps)
	s.goRun(func() error { return a.RunReminders(st.run, cfg.ReminderInterval) })
	st.app = a.Handler()
	return nil
}
