package service

import (
	"context"
	"fmt"

	"paysvc/actors/outbound/relay"
)

// startRelay starts the relay role: the outbox relay that publishes committed
// events to their topics, and the continuous ledger audit (one relay instance at
// a time audits). Its Wake is what the engine calls after each commit.
func (st *starter) startRelay(context.Context) (err error) {
	s, cfg := st.Service, st.cfg
	// Its own client: the command producer's batches may be larger than the
	// event topics accept (relay.BatchMaxBytes).
	if s.relayProducer, err = relay.NewClient(s.Brokers, "paysvc-relay-"+cfg.InstanceID); err != nil {
		return fmt.Errorf("relay kafka client: %w", err)
	}
	r := relay.New(s.DB, s.relayProducer, cfg.KafkaNamespace, s.Log, cfg.RelayPoll)
	st.wake = r.Wake
	s.goRun(func() error { return r.Run(st.run) })
	if cfg.LedgerAudit.Interval > 0 {
		s.goRun(func() error { return runLedgerAudit(st.run, s.DB, cfg.LedgerAudit, s.Log) })
	}
	return nil
}
