package service

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strconv"

	"paysvc/actors/outbound/mail"
)

// startSenders makes what the dispatcher and the API send with: the mail sender
// (the configured SMTP server, else the embedded sink, when either role runs),
// and the trusted roots of webhook endpoints (PAYSVC_WEBHOOK_CA_FILE). It runs
// before both, and completes st.cfg for them (the sender's From, the roots).
func (st *starter) startSenders(context.Context) (err error) {
	s, cfg, log := st.Service, &st.cfg, st.Log
	sendsMail := cfg.SendsMail()
	if sendsMail && cfg.SMTPURL != "" {
		mc, err := mail.ParseURL(cfg.SMTPURL)
		if err != nil {
			return fmt.Errorf("PAYSVC_SMTP_URL: %w", err)
		}
		if mc.From != "" {
			cfg.API.MailFrom = mc.From
		}
		st.mailer = mail.NewSMTPSender(mc)
	} else if sendsMail {
		if s.sink, err = mail.NewSink(cfg.SMTPSinkAddr); err != nil {
			return fmt.Errorf("embedded SMTP sink on %s (PAYSVC_SMTP_SINK_ADDR): %w", cfg.SMTPSinkAddr, err)
		}
		host, port, _ := net.SplitHostPort(s.sink.Addr())
		p, _ := strconv.Atoi(port)
		st.mailer = mail.NewSMTPSender(mail.Config{Host: host, Port: p, From: cfg.API.MailFrom, StartTLS: mail.StartTLSOff})
		log.Info("embedded SMTP sink started", "addr", s.sink.Addr())
		if cfg.Environment == "live" { // only with PAYSVC_ALLOW_SMTP_SINK (Validate)
			log.Warn("live server on the embedded SMTP sink (PAYSVC_ALLOW_SMTP_SINK=true): customers' pay-request emails are not delivered")
		}
	}
	if cfg.WebhookCAFile != "" {
		if cfg.API.WebhookRootCAs, err = webhookRoots(cfg.WebhookCAFile); err != nil {
			return err
		}
	}
	return nil
}

// webhookRoots is the system trust plus the PEM certificates of file.
func webhookRoots(file string) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("PAYSVC_WEBHOOK_CA_FILE: %w", err)
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("PAYSVC_WEBHOOK_CA_FILE: no PEM certificate in %s", file)
	}
	return pool, nil
}
