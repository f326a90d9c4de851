package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// `paysvc replay` resends an event's exact bytes to the merchant's webhook through
// the API, and refuses an unknown event and a missing key.
func TestReplay(t *testing.T) {
	t.Parallel()
	svc := servicetest.Start(t, func(c *service.Config) { c.API.WebhookAllowPrivate = true })
	m := svc.Merchant("Replays")
	rcv := newHookReceiver(t)
	r := svc.Do("POST", "/api/v1/webhooks/", map[string]any{"endpoint": rcv.srv.URL + "/hook", "challenge": "replay-secret",
		"collection_event": true}, servicetest.Bearer(m.SecretKey)...)
	if r.Status != 201 {
		t.Fatalf("create webhook: %d %s", r.Status, r.Body)
	}
	env := envWith(noDatabase, "PAYSVC_SECRET_KEY", m.SecretKey)
	tr := runCLI(t, env, "trigger", "collection_event", "--api", svc.BaseURL)
	if tr.err != nil {
		t.Fatalf("trigger: %v", tr)
	}
	eventID := str(t, decodeOne(t, tr.stdout, "event_id", "topic"), "event_id")
	waittest.Eventually(t, cliWait, func() (bool, string) {
		n := len(rcv.requests())
		return n == 1, fmt.Sprintf("%d deliveries, want 1", n)
	})

	out := runCLI(t, env, "replay", eventID, "--api", svc.BaseURL)
	if out.err != nil {
		t.Fatalf("replay: %v", out)
	}
	got := decodeOne(t, out.stdout, "id", "replays")
	var replays []map[string]any
	if err := json.Unmarshal(got["replays"], &replays); err != nil {
		t.Fatal(err)
	}
	if len(replays) != 1 || replays[0]["delivered"] != true {
		t.Fatalf("replay answer: %s", out.stdout)
	}
	reqs := rcv.requests()
	if len(reqs) != 2 || !bytes.Equal(reqs[0].body, reqs[1].body) || reqs[0].headers["webhook-id"] != reqs[1].headers["webhook-id"] {
		t.Fatalf("the replay is not the original bytes: %d requests", len(reqs))
	}
	var records int
	if err := svc.Schema.DB.Get(&records, `SELECT count(*) FROM webhook_deliveries WHERE event_id = $1`, eventID); err != nil {
		t.Fatal(err)
	}
	if records != 1 {
		t.Fatalf("%d delivery records, want 1 (a replay creates none)", records)
	}

	wantFailure(t, runCLI(t, env, "replay", "evt_nosuch", "--api", svc.BaseURL), "404")
	wantUsage(t, runCLI(t, envWith(noDatabase), "replay", eventID, "--api", svc.BaseURL))
	wantUsage(t, runCLI(t, env, "replay"))
}
