package service_test

import (
	"context"
	"strings"
	"testing"

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
	} {
		err := fromEnv(tc.vars)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want no error", tc.name, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.want)
		}
	}

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
