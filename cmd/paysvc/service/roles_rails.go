package service

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"paysvc/actors/aggregates/subscription/scheduler"
	"paysvc/actors/engine"
	"paysvc/actors/rails"
	"paysvc/actors/rails/card"
	"paysvc/actors/rails/mpesa"
	"paysvc/actors/rails/payout"
	"paysvc/storage"
	"paysvc/topics"
)

// startRails starts the rails role. Everything it sends, recovers and answers is
// its own environment's (rails.Scope): sandbox and live rails roles may share one
// Kafka and one database. Simulators' outcomes say Simulated.
func (st *starter) startRails(context.Context) error {
	scope := rails.NewScope(st.DB, st.cfg.Environment, st.cfg.KafkaNamespace)
	sandbox := st.cfg.Environment == "sandbox"
	if err := st.startPayoutRails(scope, sandbox); err != nil {
		return err
	}
	if sandbox {
		st.startCardSimulators(scope)
	}
	if err := st.startMpesa(scope, sandbox); err != nil {
		return err
	}
	s, cfg := st.Service, st.cfg
	s.goRun(func() error {
		return rails.ClearCards(st.run, s.DB, scope, s.producer, cfg.CardClearingDelay, cfg.CardClearingInterval, s.Log)
	})
	s.goRun(func() error { return watchCollections(st.run, s.DB, cfg.Environment, 30*time.Second, s.Log) })
	if sandbox {
		st.startAggregateSimulators()
	}
	if cfg.SubscriptionTick > 0 {
		st.startSubscriptionScheduler()
	}
	return nil
}

// startPayoutRails: the sandbox simulates every payout provider; a live server
// has no payout adapter but MPESA-B2C through Daraja (when configured), so each
// other transaction fails at once, saying so, and its hold is released (never a
// silent success). Unanswered payouts are recovered.
func (st *starter) startPayoutRails(scope *rails.Scope, sandbox bool) error {
	s, cfg, log := st.Service, st.cfg, st.Log
	truthful := rails.PayoutSink(s.producer, scope.Namespace, scope.Origin(false))
	var payoutRail rails.PayoutRail = rails.Unconfigured{Sink: truthful}
	closeRail := func() error { return nil }
	if sandbox {
		sim := payout.NewSimulator(rails.PayoutSink(s.producer, scope.Namespace, scope.Origin(true)), payout.Options{Delay: cfg.SimPayoutDelay})
		payoutRail, closeRail = sim, sim.Close
	}
	if d := cfg.Daraja; d.ConsumerKey != "" && d.B2CInitiatorName+d.B2CSecurityCredential+d.B2CShortcode != "" {
		// MPESA-B2C through Daraja (sandbox or live); other providers as above.
		b2c, err := mpesa.NewB2C(d, &http.Client{Timeout: 30 * time.Second})
		if err != nil {
			return fmt.Errorf("PAYSVC_DARAJA_B2C_*: %w", err)
		}
		payoutRail = &rails.DarajaB2C{Payer: b2c, DB: s.DB, Sink: truthful, Others: payoutRail,
			Pause: cfg.DarajaB2CPause, Environment: scope.Environment, Log: log}
		log.Info("rails role: MPESA-B2C payouts through Daraja", "daraja", b2c.String())
		if d.B2CStatusURL != "" { // ask Daraja about the payouts whose outcome did not come
			s.goRun(func() error {
				return rails.QueryB2CPayouts(st.run, s.DB, scope, b2c, cfg.PayoutRecoverAfter, max(cfg.PayoutRecoverAfter/4, 100*time.Millisecond), log)
			})
		}
	}
	s.goRun(func() error {
		defer closeRail()
		return rails.RunPayouts(st.run, s.Brokers, s.DB, scope, payoutRail, truthful, log)
	})
	s.goRun(func() error {
		return rails.RecoverPayouts(st.run, s.DB, scope, payoutRail, cfg.PayoutRecoverAfter, max(cfg.PayoutRecoverAfter/4, 100*time.Millisecond), log)
	})
	return nil
}

// startCardSimulators: card and PesaLink collections are simulated in the
// sandbox, whatever M-Pesa uses; a live server has no adapter yet, and their
// charges wait in their topics.
func (st *starter) startCardSimulators(scope *rails.Scope) {
	s, cfg, log := st.Service, st.cfg, st.Log
	cards := card.NewSimulator(rails.Sink(s.producer, scope.Namespace, scope.Origin(true)), cfg.SimCardDelay)
	s.goRun(func() error {
		defer cards.Close()
		return rails.RunCards(st.run, s.Brokers, scope, topics.RailsCardTopic, cards, log)
	})
	pesalink := card.NewPesalinkSimulator(rails.Sink(s.producer, scope.Namespace, scope.Origin(true)), cfg.SimCardDelay)
	s.goRun(func() error {
		defer pesalink.Close()
		return rails.RunCards(st.run, s.Brokers, scope, topics.RailsPesalinkTopic, pesalink, log)
	})
}

// startMpesa: M-Pesa collections through Daraja when configured, else simulated
// in the sandbox, each with its recovery of prompts without an outcome.
func (st *starter) startMpesa(scope *rails.Scope, sandbox bool) error {
	s, cfg, log := st.Service, st.cfg, st.Log
	switch {
	case cfg.Daraja.ConsumerKey != "":
		// Every prompt's callback URL carries its MAC (mpesa.CallbackMAC), keyed by
		// a secret the API reads from the same database.
		key, err := storage.ServiceSecret(st.run, s.DB, mpesa.CallbackMACSecret)
		if err != nil {
			return err
		}
		dc := cfg.Daraja
		dc.CallbackKey = key
		d, err := mpesa.NewDaraja(dc, &http.Client{Timeout: 30 * time.Second})
		if err != nil {
			return fmt.Errorf("PAYSVC_DARAJA_*: %w", err)
		}
		sink := rails.Sink(s.producer, scope.Namespace, scope.Origin(false))
		s.goRun(func() error {
			return rails.Run(st.run, s.Brokers, d, rails.Options{RecordAccepted: true, Scope: scope}, log)
		})
		s.goRun(func() error {
			return rails.Recover(st.run, s.DB, scope, d, sink, cfg.DarajaQueryAfter, max(cfg.DarajaQueryAfter/4, 100*time.Millisecond), log)
		})
		log.Info("rails role: M-Pesa through Daraja", "daraja", cfg.Daraja.String())
	case sandbox:
		sim := mpesa.NewSimulator(rails.Sink(s.producer, scope.Namespace, scope.Origin(true)), mpesa.SimOptions{AcceptDelay: cfg.SimAcceptDelay, FinalDelay: cfg.SimFinalDelay})
		s.goRun(func() error {
			defer sim.Close()
			return rails.Run(st.run, s.Brokers, sim, rails.Options{RetryUnavailable: true, Scope: scope, Simulated: true}, log)
		})
		// Not before the slowest outcome (a prompt nobody answers, 3x the two
		// delays) could have arrived twice over.
		after := max(cfg.SimRecoverAfter, 6*(cfg.SimAcceptDelay+cfg.SimFinalDelay))
		s.goRun(func() error {
			return rails.RecoverSandbox(st.run, s.DB, scope, sim, after, max(after/4, 100*time.Millisecond), log)
		})
	default:
		// Nothing is lost: prompts wait in their topic until a rails role with a
		// live adapter consumes them.
		log.Error("rails role: no M-Pesa adapter configured (PAYSVC_DARAJA_*); STK requests wait in " + cfg.KafkaNamespace.Topic(topics.RailsMpesaSTKTopic))
	}
	return nil
}

// startAggregateSimulators runs the aggregates' sandbox rails (refunds), each as
// its kind defines it (Kind.Simulate), from the same list the engine applies.
func (st *starter) startAggregateSimulators() {
	s, cfg := st.Service, st.cfg
	for _, k := range st.kinds {
		if k.Simulate == nil {
			continue
		}
		d := engine.SimDeps{DB: s.DB, Environment: cfg.Environment, Delay: cfg.SimAggregateDelay, Log: s.Log, Produce: s.produceCommand}
		s.goRun(func() error { return k.Simulate(st.run, d) })
	}
}

// startSubscriptionScheduler runs the subscription cycles: stateless and
// restart-safe; any number of rails instances may run it (cycle ids are derived,
// docs/api-decisions.md). It bills only its environment's enabled merchants, and
// stamps its cycles with the environment and Simulated (a cycle's charge is
// answered by the subscription's test card).
func (st *starter) startSubscriptionScheduler() {
	s, cfg := st.Service, st.cfg
	sch := &scheduler.Scheduler{DB: s.DB, Environment: cfg.Environment, Produce: scheduler.KafkaProducer(s.producer, cfg.KafkaNamespace), Log: s.Log}
	s.goRun(func() error { return sch.Run(st.run, cfg.SubscriptionTick) })
}
