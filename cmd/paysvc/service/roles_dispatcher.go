package service

import (
	"context"

	"paysvc/actors/outbound/webhooks/callback"
	"paysvc/actors/outbound/webhooks/dispatch"
	"paysvc/actors/outbound/webhooks/outbound"
)

// startDispatcher starts the dispatcher role: webhook deliveries (and the mail
// of webhooks that keep failing), payment-file callbacks, and the pruning of
// delivered webhook events. Private endpoints are reachable only from a sandbox
// that allows them.
func (st *starter) startDispatcher(context.Context) error {
	s, cfg := st.Service, st.cfg // a copy: the webhook settings below are the dispatcher's
	client := outbound.New(outbound.Options{AllowPrivate: cfg.API.WebhookAllowPrivate && cfg.Environment == "sandbox",
		RootCAs: cfg.API.WebhookRootCAs})
	cfg.Webhooks.MailFrom = cfg.API.MailFrom
	cfg.Webhooks.SessionTimeout = cfg.SessionTimeout
	cfg.Webhooks.Namespace = cfg.KafkaNamespace
	dsp := dispatch.New(cfg.Webhooks, s.DB, client, st.mailer, s.Log)
	s.goRun(func() error { return dsp.Run(st.run, s.Brokers) })
	s.goRun(func() error { return callback.Run(st.run, s.Brokers, cfg.KafkaNamespace, s.DB, client, s.Log) })
	s.goRun(func() error { return pruneWebhookEvents(st.run, s.DB, cfg.Retention, s.Log) })
	return nil
}
