package service_test

import (
	"context"
	"strings"
	"testing"

	"paysvc/actors/rails/mpesa/mpesatest"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// A live server refuses the development stand-ins (the embedded broker, the SMTP
// sink) unless an operator opts in by name, and then warns at every start
// (a forgotten variable must not silently keep the command log on one
// disk or send customers' mail nowhere).
func TestLiveServerRefusesStandIns(t *testing.T) {
	t.Parallel()
	fromEnv := func(vars map[string]string) error {
		c, err := service.FromEnv(func(k string) string { return vars[k] })
		if err != nil {
			return err
		}
		return c.CheckStandIns()
	}
	for _, tc := range []struct {
		name string
		vars map[string]string
		want string // the variable the error must name; "" for no error
	}{
		{"LiveNoBrokers", map[string]string{"PAYSVC_ENVIRONMENT": "live", "PAYSVC_SMTP_URL": "smtp://mail:25"}, "PAYSVC_KAFKA_BROKERS"},
		{"LiveNoSMTP", map[string]string{"PAYSVC_ENVIRONMENT": "live", "PAYSVC_KAFKA_BROKERS": "k:9092"}, "PAYSVC_SMTP_URL"},
		{"LiveNoSMTPDispatcher", map[string]string{"PAYSVC_ENVIRONMENT": "live", "PAYSVC_KAFKA_BROKERS": "k:9092",
			"PAYSVC_ROLES": "dispatcher"}, "PAYSVC_SMTP_URL"},
		{"LiveEngineSendsNoMail", map[string]string{"PAYSVC_ENVIRONMENT": "live", "PAYSVC_KAFKA_BROKERS": "k:9092",
			"PAYSVC_ROLES": "engine,relay,rails"}, ""},
		{"LiveReal", map[string]string{"PAYSVC_ENVIRONMENT": "live", "PAYSVC_KAFKA_BROKERS": "k:9092", "PAYSVC_SMTP_URL": "smtp://mail:25"}, ""},
		{"LiveOptedIn", map[string]string{"PAYSVC_ENVIRONMENT": "live", "PAYSVC_ALLOW_EMBEDDED_KAFKA": "true",
			"PAYSVC_ALLOW_SMTP_SINK": "true"}, ""},
		{"SandboxDefaults", map[string]string{}, ""},
		// A live server with Daraja credentials and no Daraja root would have sent to
		// Safaricom's sandbox and recorded its outcomes as live payments.
		{"LiveDarajaNoBaseURL", liveDaraja(nil), "PAYSVC_DARAJA_BASE_URL"},
		{"LiveDarajaSandboxHost", liveDaraja(map[string]string{"PAYSVC_DARAJA_BASE_URL": "https://sandbox.safaricom.co.ke"}), "PAYSVC_DARAJA_BASE_URL"},
		{"LiveDarajaOtherHost", liveDaraja(map[string]string{"PAYSVC_DARAJA_BASE_URL": "https://daraja.proxy.internal"}), "PAYSVC_DARAJA_BASE_URL"},
		{"LiveDarajaProductionOverHTTP", liveDaraja(map[string]string{"PAYSVC_DARAJA_BASE_URL": "http://api.safaricom.co.ke"}), "PAYSVC_DARAJA_BASE_URL"},
		{"LiveDarajaProduction", liveDaraja(map[string]string{"PAYSVC_DARAJA_BASE_URL": "https://api.safaricom.co.ke/"}), ""},
		{"LiveDarajaSandboxOptedIn", liveDaraja(map[string]string{"PAYSVC_DARAJA_BASE_URL": "https://sandbox.safaricom.co.ke",
			"PAYSVC_DARAJA_ALLOW_SANDBOX_IN_LIVE": "true"}), ""},
		// The override does not stand for the variable: a live root is always named.
		{"LiveDarajaOptedInNoBaseURL", liveDaraja(map[string]string{"PAYSVC_DARAJA_ALLOW_SANDBOX_IN_LIVE": "true"}), "PAYSVC_DARAJA_BASE_URL"},
		{"LiveWithoutDaraja", map[string]string{"PAYSVC_ENVIRONMENT": "live", "PAYSVC_KAFKA_BROKERS": "k:9092", "PAYSVC_SMTP_URL": "smtp://mail:25"}, ""},
	} {
		err := fromEnv(tc.vars)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want no error", tc.name, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.want)
		}
	}

	// A root with credentials in it is refused (not the production API as such),
	// and the refusal, which reaches the log, does not print the password.
	t.Run("RefusalPrintsNoCredentials", func(t *testing.T) {
		err := fromEnv(liveDaraja(map[string]string{"PAYSVC_DARAJA_BASE_URL": "https://ops:s3cr3t-pw@api.safaricom.co.ke"}))
		if err == nil || !strings.HasPrefix(err.Error(), "PAYSVC_DARAJA_BASE_URL") {
			t.Fatalf("a root with credentials: %v, want a refusal naming PAYSVC_DARAJA_BASE_URL", err)
		}
		if strings.Contains(err.Error(), "s3cr3t-pw") {
			t.Fatalf("the refusal prints the root's password: %v", err)
		}
	})

	t.Run("SandboxKeepsTheSandboxDefault", func(t *testing.T) {
		vars := liveDaraja(nil)
		delete(vars, "PAYSVC_ENVIRONMENT")
		c, err := service.FromEnv(func(k string) string { return vars[k] })
		if err != nil || c.Daraja.BaseURL != service.DarajaSandboxURL {
			t.Errorf("sandbox Daraja root %q (%v), want %s", c.Daraja.BaseURL, err, service.DarajaSandboxURL)
		}
		if err := c.CheckStandIns(); err != nil {
			t.Errorf("sandbox server on Daraja's sandbox refused: %v", err)
		}
	})

	t.Run("LiveDarajaOptedInWarns", func(t *testing.T) {
		// A live server on the fake Daraja (not production's host) starts only opted
		// in, and says so at start.
		fake := mpesatest.NewFakeDaraja()
		defer fake.Close()
		env := servicetest.Start(t, func(c *service.Config) {
			c.Environment, c.API.Environment = "live", "live"
			c.Daraja = fake.Config("http://127.0.0.1:1/api/v1/payment/mpesa/callback/" + strings.Repeat("t", 32))
			c.API.DarajaCallbackToken = strings.Repeat("t", 32)
		})
		if out := env.Logs.String(); !strings.Contains(out, "PAYSVC_DARAJA_ALLOW_SANDBOX_IN_LIVE=true") {
			t.Errorf("a live start on a non-production Daraja logged no warning naming PAYSVC_DARAJA_ALLOW_SANDBOX_IN_LIVE")
		}
		cfg := env.Config
		cfg.AllowDarajaNonProduction = false
		if _, err := service.Start(context.Background(), cfg, servicetest.Logger()); err == nil ||
			!strings.HasPrefix(err.Error(), "PAYSVC_DARAJA_BASE_URL") {
			t.Errorf("live start on a non-production Daraja without opting in: %v", err)
		}
	})

	t.Run("WarnsWhenOptedIn", func(t *testing.T) {
		// servicetest opts in to both stand-ins, as an operator would have to.
		// On the embedded broker (the stand-in), whatever Kafka other tests share.
		env := servicetest.Start(t, func(c *service.Config) {
			c.Environment, c.API.Environment = "live", "live"
			c.KafkaBrokers = nil
		})
		out := env.Logs.String()
		for _, want := range []string{"PAYSVC_ALLOW_EMBEDDED_KAFKA=true", "PAYSVC_ALLOW_SMTP_SINK=true"} {
			if !strings.Contains(out, want) {
				t.Errorf("a live start on the stand-ins logged no warning naming %s", want)
			}
		}
		cfg := env.Config
		cfg.AllowEmbeddedKafka = false
		if _, err := service.Start(context.Background(), cfg, servicetest.Logger()); err == nil ||
			!strings.HasPrefix(err.Error(), "PAYSVC_KAFKA_BROKERS") {
			t.Errorf("live start on the embedded broker without opting in: %v", err)
		}
		cfg.AllowEmbeddedKafka, cfg.AllowSMTPSink = true, false
		if _, err := service.Start(context.Background(), cfg, servicetest.Logger()); err == nil ||
			!strings.HasPrefix(err.Error(), "PAYSVC_SMTP_URL") {
			t.Errorf("live start on the SMTP sink without opting in: %v", err)
		}
	})
}

// liveDaraja is a live configuration with real Kafka and mail and Daraja
// credentials, plus vars.
func liveDaraja(vars map[string]string) map[string]string {
	out := map[string]string{"PAYSVC_ENVIRONMENT": "live", "PAYSVC_KAFKA_BROKERS": "k:9092", "PAYSVC_SMTP_URL": "smtp://mail:25",
		"PAYSVC_DARAJA_CONSUMER_KEY": "ck", "PAYSVC_DARAJA_CONSUMER_SECRET": "cs",
		"PAYSVC_DARAJA_CALLBACK_BASE_URL": "https://pay.example.com", "PAYSVC_DARAJA_CALLBACK_TOKEN": strings.Repeat("a", 32)}
	for k, v := range vars {
		out[k] = v
	}
	return out
}
