package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service/servicetest"
)

// listen --print watches the merchant's events without forwarding them: one JSON
// line an event on stdout, so a pipe (jq) reads them, and the ready line on stderr.
func TestListenPrint(t *testing.T) {
	t.Parallel()
	svc := servicetest.Start(t, nil)
	m := svc.Merchant("Dev")
	env := envWith(noDatabase, "PAYSVC_SECRET_KEY", m.SecretKey)
	stdout, stderr := startListen(t, env, "--print", "--api", svc.BaseURL)
	waittest.Eventually(t, cliWait, func() (bool, string) {
		return strings.Contains(stderr.String(), "Ready! Printing events"), "no ready line on stderr"
	})
	r := runCLI(t, env, "trigger", "reversal_event", "--api", svc.BaseURL)
	if r.err != nil {
		t.Fatalf("trigger: %v", r)
	}
	eventID := str(t, decodeOne(t, r.stdout, "event_id", "topic"), "event_id")
	var ev struct {
		ID    string          `json:"id"`
		Topic string          `json:"topic"`
		Data  json.RawMessage `json:"data"`
	}
	waittest.Eventually(t, cliWait, func() (bool, string) {
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		return len(lines) == 1 && json.Unmarshal([]byte(lines[0]), &ev) == nil && ev.ID != "", "stdout: " + stdout.String()
	})
	if ev.ID != eventID || ev.Topic != "reversal_event" || len(ev.Data) < 2 || ev.Data[0] != '{' {
		t.Fatalf("printed %+v (data %s), want event %s of reversal_event with its data", ev, ev.Data, eventID)
	}
	if strings.Contains(stdout.String(), "whsec_") || strings.Contains(stdout.String(), "Ready") {
		t.Errorf("stdout holds more than the events: %s", stdout)
	}
}

func TestListenNeedsForwardOrPrint(t *testing.T) {
	r := runCLI(t, envWith(noDatabase, "PAYSVC_SECRET_KEY", "ISSecretKey_test_00"), "listen")
	var ue usageError
	if r.err == nil || !errors.As(r.err, &ue) || !strings.Contains(ue.msg, "--print") {
		t.Fatalf("listen without --forward-to or --print: %v; want the usage naming --print", r)
	}
}
