package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"paysvc/actors/rails/mpesa/mpesatest"
	"paysvc/actors/values/waittest"
	"paysvc/storage/storagetest"
)

// The Daraja callback token is the only thing that authenticates Daraja's callbacks:
// `paysvc serve` with Daraja (STK and B2C) configured prints its configuration, the
// rails' adapters and its request log without it, every callback URL masked.
func TestServeNeverPrintsTheCallbackToken(t *testing.T) {
	t.Parallel()
	s := storagetest.New(t)
	fake := mpesatest.NewFakeDaraja()
	defer fake.Close()
	const token = "tok3n-0123456789abcdef0123456789abcdef"
	env := envFor(s, "PAYSVC_HTTP_ADDR", "127.0.0.1:0", "PAYSVC_ADMIN_ADDR", "127.0.0.1:0", "PAYSVC_KAFKA_PORT", "0", "PAYSVC_DATA_DIR", t.TempDir(),
		"PAYSVC_SMTP_SINK_ADDR", "127.0.0.1:0", "PAYSVC_LOG_LEVEL", "debug", "PAYSVC_LOG_FORMAT", "json",
		"PAYSVC_ENVIRONMENT", "live", "PAYSVC_PUBLIC_BASE_URL", "https://pay.example.com",
		"PAYSVC_ALLOW_EMBEDDED_KAFKA", "true", "PAYSVC_ALLOW_SMTP_SINK", "true", "PAYSVC_DARAJA_ALLOW_SANDBOX_IN_LIVE", "true",
		"PAYSVC_DARAJA_BASE_URL", fake.URL(), "PAYSVC_DARAJA_CONSUMER_KEY", mpesatest.FakeConsumerKey,
		"PAYSVC_DARAJA_CONSUMER_SECRET", mpesatest.FakeConsumerSecret, "PAYSVC_DARAJA_SHORTCODE", mpesatest.FakeShortCode,
		"PAYSVC_DARAJA_PASSKEY", mpesatest.FakePasskey, "PAYSVC_DARAJA_B2C_INITIATOR", mpesatest.FakeB2CInitiator,
		"PAYSVC_DARAJA_B2C_SECURITY_CREDENTIAL", mpesatest.FakeB2CSecurityCredential, "PAYSVC_DARAJA_B2C_SHORTCODE", mpesatest.FakeB2CShortcode,
		"PAYSVC_DARAJA_CALLBACK_BASE_URL", "https://pay.example.com/", "PAYSVC_DARAJA_CALLBACK_TOKEN", token)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"paysvc", "serve"}, func(k string) string { return env[k] }, &stdout, &stderr)
	}()
	addr := ""
	waittest.Eventually(t, time.Minute, func() (bool, string) {
		for _, line := range strings.Split(stderr.String(), "\n") {
			var l struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "paysvc serving" {
				addr = l.Addr
			}
		}
		select {
		case err := <-done:
			t.Fatalf("serve ended: %v\n%s", err, stderr.String())
		default:
		}
		return addr != "", "serve never started:\n" + stderr.String()
	})
	// Callbacks at the token's URLs (a malformed body is a 400 and a log line).
	for _, path := range []string{"/api/v1/payment/mpesa/callback/", "/api/v1/send-money/mpesa/result/",
		"/api/v1/send-money/mpesa/status/", "/api/v1/send-money/mpesa/timeout/"} {
		resp, err := http.Post("http://"+addr+path+token, "application/json", strings.NewReader(`{"Body":{}}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Fatalf("%s<token>: %d, want 400 (the token is accepted, the body is not)", path, resp.StatusCode)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	out := stderr.String() + stdout.String()
	if strings.Contains(out, token) || strings.Contains(out, token[:16]) {
		t.Fatalf("the callback token was printed:\n%s", out)
	}
	// The configuration and both Daraja adapters were printed, masked.
	for _, want := range []string{`"daraja_callback_url":"https://pay.example.com/api/v1/payment/mpesa/callback/****"`,
		"CallbackURL:https://pay.example.com/api/v1/payment/mpesa/callback/****",
		"B2CResultURL:https://pay.example.com/api/v1/send-money/mpesa/result/****"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
}
