package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage"
	"paysvc/topics"
)

// An operator's kill switches of one payment file, through the CLI and the engine
// (docs/security.md, "Kill switches"). Two files are approved while the rails role
// is stopped, so nothing of either was handed to a rail. A is held, B failed: the
// rails then send nothing of A and B (their transactions stay PENDING and A's
// money stays held), B's hold goes back to the wallet, and once A is released it
// is paid to the cent. Repeats and files of other states answer clearly and
// change nothing; each change is in the file's audit and on the events topic.
func TestPayoutHoldReleaseFail(t *testing.T) {
	t.Parallel()
	svc := servicetest.Start(t, func(c *service.Config) {
		c.Roles = []string{service.RoleAPI, service.RoleEngine, service.RoleRelay, service.RoleDispatcher}
		c.PayoutRecoverAfter = 300 * time.Millisecond // recovery would resend a held file's transactions at once
	})
	m := svc.Merchant("Held")
	auth := servicetest.Bearer(m.SecretKey)
	settlement := svc.Settlement(auth)
	svc.Deposit(auth, settlement, "10000")
	file := func(approval string, n int) map[string]any {
		var txns []any
		for i := range n {
			txns = append(txns, map[string]any{"account": fmt.Sprintf("25470837%04d", 4100+i), "amount": "100"})
		}
		r := svc.Do("POST", "/api/v1/send-money/initiation/", map[string]any{"currency": "KES", "provider": "MPESA-B2C",
			"requires_approval": approval, "transactions": txns}, auth...)
		if r.Status != 201 {
			t.Fatalf("initiation: %d %s", r.Status, r.Body)
		}
		return r.Map(t)
	}
	status := func(f map[string]any) map[string]any {
		return svc.Do("POST", "/api/v1/send-money/status/", map[string]any{"file_id": f["file_id"]}, auth...).Map(t)
	}
	balance := func() (string, string) {
		w := svc.Do("GET", "/api/v1/wallets/"+settlement+"/", nil, auth...).Map(t)
		return w["current_balance"].(string), w["available_balance"].(string)
	}
	a, b, preview := file("NO", 3), file("NO", 2), file("YES", 1)
	if cur, av := balance(); cur != "10000.00" || av != "9450.00" { // 5 x (100 + 10) held
		t.Fatalf("after approval: %s / %s", cur, av)
	}
	env := envFor(svc.Schema, "PAYSVC_KAFKA_BROKERS", strings.Join(svc.Svc.Brokers, ","),
		"PAYSVC_KAFKA_NAMESPACE", string(svc.Config.KafkaNamespace))
	aID, bID := a["file_id"].(string), b["file_id"].(string)

	wantUsage(t, runCLI(t, env, "payout", "fail", bID)) // no reason
	wantUsage(t, runCLI(t, env, "payout", "hold"))
	wantUsage(t, runCLI(t, env, "payout", "hold", aID, "extra"))
	wantFailure(t, runCLI(t, env, "payout", "hold", "NOSUCHFILE"), "not found")
	wantFailure(t, runCLI(t, env, "payout", "hold", preview["file_id"].(string)), "PREVIEW-AND-APPROVE: only a file being paid")

	out := decode(t, runCLI(t, env, "payout", "hold", aID, "--reason", "Key reported stolen", "--by", "ops-amina"))
	if out["on_hold"] != true || out["changed"] != true || out["action"] != "HOLD" {
		t.Fatalf("hold: %v", out)
	}
	again := decode(t, runCLI(t, env, "payout", "hold", aID, "--by", "ops-amina"))
	if again["changed"] != false || !strings.Contains(again["message"].(string), "on hold already") {
		t.Fatalf("hold of a held file: %v", again)
	}
	if r := decode(t, runCLI(t, env, "payout", "release", bID, "--by", "ops-amina")); r["changed"] != false ||
		!strings.Contains(r["message"].(string), "not on hold") {
		t.Fatalf("release of a file not held: %v", r)
	}
	failed := decode(t, runCLI(t, env, "payout", "fail", bID, "--reason", "Paid to numbers the merchant never gave", "--by", "ops-amina"))
	if failed["failed"] != float64(2) || failed["released"] != "220.00" || failed["status"] != "COMPLETE" {
		t.Fatalf("fail: %v", failed)
	}
	wantFailure(t, runCLI(t, env, "payout", "fail", bID, "--reason", "again"), "COMPLETE: only a file being paid")
	if cur, av := balance(); cur != "10000.00" || av != "9670.00" { // B's hold is back; A's stays held
		t.Fatalf("after the fail: %s / %s", cur, av)
	}
	sb := status(b)
	if sb["failed_reason"] != "Failed by the operator: Paid to numbers the merchant never gave" || sb["failed_amount"] != "200.00" {
		t.Fatalf("failed file: %v", sb)
	}

	// The merchant's console shows both, with the operator's reason.
	console := signInConsole(t, svc.BaseURL, m.SecretKey)
	if page := console("/console/payment-files/" + aID); !strings.Contains(page, `id="file-held"`) ||
		!strings.Contains(page, "On hold by the operator: Key reported stolen.") {
		t.Fatalf("held file's page:\n%s", page)
	}
	if page := console("/console/payment-files/" + bID); !strings.Contains(page, `id="file-failed-by-operator"`) ||
		!strings.Contains(page, "Failed by the operator: Paid to numbers the merchant never gave.") {
		t.Fatalf("failed file's page:\n%s", page)
	}

	// The rails start: a held file's transactions are not sent, nor the failed ones.
	rails := servicetest.StartPeer(t, svc, "sandbox", service.RoleRails)
	waitRailsTook(t, svc, 2) // both files' requests
	time.Sleep(time.Second)  // recovery passes (every 75 ms) and the simulator (40 ms) had their chance
	for _, x := range status(a)["transactions"].([]any) {
		if st := x.(map[string]any)["status"]; st != "PENDING" {
			t.Fatalf("a held file's transaction was submitted: %v", x)
		}
	}
	if cur, av := balance(); cur != "10000.00" || av != "9670.00" {
		t.Fatalf("held: %s / %s", cur, av)
	}

	if r := decode(t, runCLI(t, env, "payout", "release", aID, "--reason", "Merchant confirmed the file", "--by", "ops-juma")); r["on_hold"] != false || r["changed"] != true {
		t.Fatalf("release: %v", r)
	}
	waittest.Eventually(t, cliWait, func() (bool, string) {
		st := status(a)["status"]
		return st == "COMPLETE", fmt.Sprintf("file A is %v after release, not COMPLETE", st)
	})
	if sa := status(a); sa["paid_amount"] != "300.00" || sa["actual_charges"] != "30.00" {
		t.Fatalf("released file: %v", sa)
	}
	if cur, av := balance(); cur != "9670.00" || av != "9670.00" {
		t.Fatalf("after release: %s / %s, want 9670.00 both (no hold left)", cur, av)
	}
	if page := console("/console/payment-files/" + aID); strings.Contains(page, `id="file-held"`) {
		t.Fatalf("released file's page still says held:\n%s", page)
	}
	rep, err := storage.CheckLedger(context.Background(), svc.Schema.DB)
	if err != nil || !rep.OK {
		t.Fatalf("ledger check: %+v %v", rep, err)
	}
	_ = rails

	// The audit: who, when, why, by which command, in the file's stored header.
	var raw []byte
	if err := svc.Schema.DB.Get(&raw, `SELECT data -> 'operator_actions' FROM payout_files WHERE file_id = $1`, aID); err != nil {
		t.Fatal(err)
	}
	var audit []struct {
		Action, By, Reason string
		CommandID          string `json:"command_id"`
	}
	if err := json.Unmarshal(raw, &audit); err != nil {
		t.Fatal(err)
	}
	if len(audit) != 2 || audit[0].Action != "HOLD" || audit[0].By != "ops-amina" || audit[0].Reason != "Key reported stolen" ||
		audit[1].Action != "RELEASE" || audit[1].By != "ops-juma" || audit[0].CommandID != out["command_id"] {
		t.Fatalf("audit %s", raw)
	}

	// The events topic carries each change, with the operator's action.
	seen := map[string]topics.SendMoney{}
	readEvents(t, svc, topics.EventTopics[topics.SendMoneyEvent], func(e topics.Event) bool {
		var p topics.SendMoney
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if p.Operator != nil {
			seen[p.FileID+" "+p.Operator.Action] = p
		}
		return len(seen) == 3
	})
	if h := seen[aID+" HOLD"]; !h.OnHold || h.Operator.Reason != "Key reported stolen" || h.Status != "PROCESSING" {
		t.Fatalf("hold event %+v", h)
	}
	if r := seen[aID+" RELEASE"]; r.OnHold || r.Operator == nil {
		t.Fatalf("release event %+v", r)
	}
	if f := seen[bID+" FAIL"]; f.Operator.Failed != 2 || f.Status != "COMPLETE" || f.FailedAmount != "200.00" {
		t.Fatalf("fail event %+v", f)
	}
}

// decode is the JSON object a successful CLI run printed.
func decode(t *testing.T, r result) map[string]any {
	t.Helper()
	if r.err != nil {
		t.Fatalf("CLI: %v", r)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("CLI output is not JSON: %v\n%s", err, r.stdout)
	}
	return m
}

// waitRailsTook waits until the sandbox rails role has read n payout requests.
func waitRailsTook(t *testing.T, svc *servicetest.Env, n int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(svc.Svc.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	waittest.Eventually(t, cliWait, func() (bool, string) {
		got := committed(t, cl, svc.Config.KafkaNamespace.Group("paysvc-rails-payout-sandbox"), svc.Topic(topics.RailsPayoutTopic))
		return got >= n, fmt.Sprintf("the rails role read %d payout requests, want %d", got, n)
	})
}

// readEvents reads a logical event topic from its start until done says so.
func readEvents(t *testing.T, svc *servicetest.Env, logical string, done func(topics.Event) bool) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(svc.Svc.Brokers...), kgo.ConsumeTopics(svc.Topic(logical)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("events of %s: not all seen in time", logical)
		}
		stop := false
		fs.EachRecord(func(r *kgo.Record) {
			var e topics.Event
			if err := json.Unmarshal(r.Value, &e); err != nil {
				t.Fatal(err)
			}
			if !stop && done(e) {
				stop = true
			}
		})
		if stop {
			return
		}
	}
}

// committed is the sum of group's committed offsets on topic.
func committed(t *testing.T, cl *kgo.Client, group, topic string) int64 {
	t.Helper()
	offs, err := kadm.NewClient(cl).FetchOffsets(context.Background(), group)
	if err != nil {
		return 0
	}
	n := int64(0)
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			n += o.At
		}
	})
	return n
}

var consoleCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// signInConsole signs in to the merchant console with a secret key, as a browser
// does (its cookies in a jar), and returns a getter of its pages.
func signInConsole(t *testing.T, base, key string) func(path string) string {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) string {
		t.Helper()
		resp, err := hc.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d\n%s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	m := consoleCSRF.FindStringSubmatch(get("/console/sign-in"))
	if m == nil {
		t.Fatal("no csrf field on the sign-in page")
	}
	req, err := http.NewRequest("POST", base+"/console/sign-in", strings.NewReader(url.Values{"csrf": {m[1]}, "key": {key}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("console sign-in: %d", resp.StatusCode)
	}
	return get
}
