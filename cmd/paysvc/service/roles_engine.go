package service

import (
	"context"

	"paysvc/actors/engine"
)

// checkCommandLog is the engine role's check before anything consumes: the
// command log must hold what the offsets the database stored say comes next
// (commandlog.go): neither behind them nor deleted past them by retention.
func (st *starter) checkCommandLog(ctx context.Context) error {
	return checkCommandLog(ctx, st.DB, st.producer, st.cfg.KafkaNamespace, st.cfg.CommandRetention, st.cfg.AcceptCommandLogReset, st.Log)
}

// startEngine starts the engine role: the partition workers that apply the
// aggregates' commands (st.kinds, the one list of aggregates.go) and commit them,
// waking the relay after each commit, and the trim of the stored command replies.
func (st *starter) startEngine(context.Context) error {
	s, cfg := st.Service, st.cfg
	e, err := engine.New(engine.Config{Brokers: s.Brokers, Namespace: cfg.KafkaNamespace, Owner: cfg.InstanceID, SessionTimeout: cfg.SessionTimeout,
		ActorIdle: cfg.EngineIdleAfter, Logger: s.Log, OnCommit: st.wake, Kinds: st.kinds}, s.DB)
	if err != nil {
		return err
	}
	s.engine.Store(e) // for /readyz
	s.goRun(func() error { return e.Run(st.run) })
	s.goRun(func() error { return trimCommandReplies(st.run, s.DB, cfg.Retention, s.Log) })
	return nil
}
