package service_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"paysvc/actors/values/money"
	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage"
	"paysvc/topics"
)

// startRoles runs a service with only the given roles in this process, on the API's
// Kafka and database.
func startRoles(t *testing.T, api *servicetest.Env, id string, roles ...string) *service.Service {
	cfg := api.Config
	cfg.Roles = roles
	cfg.KafkaBrokers = api.Svc.Brokers
	cfg.InstanceID = id
	cfg.HTTPAddr = "127.0.0.1:0"
	return servicetest.Launch(t, cfg)
}

// A file of 5,000 transactions is paid while the engine is replaced and the rails
// process dies holding outcomes it never reported: the file still completes, every
// transaction is paid at most once (one ledger debit each), none is lost, and the
// money reconciles to the cent with no hold left.
func TestPayoutFileSurvivesEngineAndRailsRestart(t *testing.T) {
	t.Parallel()
	api := startAPIOnly(t)
	// The first rails process is slow enough that it dies between taking the
	// requests and reporting their outcomes, even on a machine busy with other tests.
	api.Config.SimPayoutDelay = 30 * time.Second
	e1 := startRoles(t, api, "engine-1", service.RoleEngine)
	r1 := startRoles(t, api, "rails-1", service.RoleRails)
	m := api.Merchant("Payroll")
	auth := servicetest.Bearer(m.SecretKey)
	settlement := api.Settlement(auth)
	api.Deposit(auth, settlement, "9000000")

	const n = 5000
	txns := make([]map[string]any, n)
	wantPaid, wantFailed, wantCharges := money.Zero(), money.Zero(), money.Zero()
	for i := range txns {
		acct := fmt.Sprintf("25471%06d5", i) // never a magic suffix (docs/sandbox.md)
		amount := money.MustParse(fmt.Sprint(100 + i%900))
		if i%50 == 0 {
			acct = fmt.Sprintf("2547%04d0011", 1000+i/50) // invalid account: fails
			wantFailed = wantFailed.Add(amount)
		} else {
			wantPaid = wantPaid.Add(amount)
			fee := money.MustParse("10")
			if amount.Cmp(money.MustParse("1000")) > 0 {
				t.Fatal("test amounts stay under 1000: their B2C fee is the minimum")
			}
			wantCharges = wantCharges.Add(fee)
		}
		txns[i] = map[string]any{"account": acct, "amount": amount.String(), "name": "Worker", "idempotency_key": fmt.Sprintf("pay-%d", i)}
	}
	// Under -race on a busy machine a 5,000-transaction command can outlast the
	// reply timeout: a 504 is retried with the same Idempotency-Key, as a client would.
	// The bound is the old one of ten tries, each a reply timeout and a second's
	// pause; the status below judges the last answer, so Wait, not Eventually.
	var r servicetest.Response
	_ = waittest.Wait(10*(api.Config.API.ReplyTimeout+time.Second), func() (bool, string) {
		r = api.Do("POST", "/api/v1/send-money/initiation/", map[string]any{"currency": "KES", "provider": "MPESA-B2C",
			"requires_approval": "NO", "transactions": txns}, append(auth, "Idempotency-Key", "payroll-file")...)
		return r.Status != 504 && r.Status != 409, fmt.Sprintf("initiation: %d", r.Status)
	})
	if r.Status != 201 {
		t.Fatalf("initiation: %d %.300s", r.Status, r.Body)
	}
	f := r.Map(t)
	if f["status"] != "PROCESSING" {
		t.Fatalf("file: %v", f["status"])
	}
	tracking := f["tracking_id"].(string)

	// Once the rail has taken the transactions, take both processes down mid-file.
	// The moment the rails role has taken the file's requests (committed their
	// offsets), before the rail reports their outcomes.
	adm := api.Admin()
	waittest.Eventually(t, 60*time.Second, func() (bool, string) {
		offs, err := adm.FetchOffsets(context.Background(), api.Config.KafkaNamespace.Group("paysvc-rails-payout-sandbox")) // the sandbox's group (rails.Scope.Group)
		taken := int64(0)
		if err == nil {
			offs.Each(func(o kadm.OffsetResponse) {
				if o.Topic == api.Topic(topics.RailsPayoutTopic) && o.Err == nil {
					taken += o.At
				}
			})
		}
		return taken > 0, "the rails role never took the file's requests"
	})
	t0 := time.Now()
	r1.Close() // first: its simulator drops the outcomes it has not reported
	t.Logf("rails closed in %s", time.Since(t0))
	e1.Close()
	t.Logf("engine closed in %s", time.Since(t0))
	var finished int
	if err := api.Schema.DB.Get(&finished, `SELECT count(*) FROM payout_transactions WHERE status IN ('COMPLETE','FAILED')`); err != nil {
		t.Fatal(err)
	}
	if finished == n {
		t.Fatal("the file finished before the processes went down: the test proves nothing")
	}
	t.Logf("%d of %d transactions had their outcome when engine and rails went down", finished, n)
	time.Sleep(300 * time.Millisecond) // the outage itself: both are already closed, so nothing is awaited; the gap is the fault
	e2 := startRoles(t, api, "engine-2", service.RoleEngine)
	defer e2.Close()
	api.Config.SimPayoutDelay = 40 * time.Millisecond // the new one answers at once
	r2 := startRoles(t, api, "rails-2", service.RoleRails)
	defer r2.Close()

	var done map[string]any
	waittest.Eventually(t, 120*time.Second, func() (bool, string) {
		r := api.Do("POST", "/api/v1/send-money/status/", map[string]any{"tracking_id": tracking}, auth...)
		done = r.Map(t)
		return done["status"] == "COMPLETE", fmt.Sprintf("file stuck in %v", done["status"])
	})
	got := func(k string) money.Amount { return money.MustParse(done[k].(string)) }
	if !got("paid_amount").Equal(wantPaid) || !got("failed_amount").Equal(wantFailed) || !got("actual_charges").Equal(wantCharges) {
		t.Fatalf("paid %s (want %s), failed %s (want %s), charges %s (want %s)", got("paid_amount"), wantPaid,
			got("failed_amount"), wantFailed, got("actual_charges"), wantCharges)
	}
	// One debit per paid transaction, none for a failed one.
	var twice, debits int
	if err := api.Schema.DB.Get(&twice, `SELECT count(*) FROM (SELECT transaction_id FROM ledger_entries
		WHERE trans_type = 'PAYOUT' AND wallet_id IS NOT NULL GROUP BY transaction_id HAVING count(*) > 1) x`); err != nil {
		t.Fatal(err)
	}
	if err := api.Schema.DB.Get(&debits, `SELECT count(*) FROM ledger_entries WHERE trans_type = 'PAYOUT' AND wallet_id IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	if twice != 0 || debits != n-n/50 {
		t.Fatalf("%d transactions debited twice; %d debits for %d paid", twice, debits, n-n/50)
	}
	w := api.Do("GET", "/api/v1/wallets/"+settlement+"/", nil, auth...).Map(t)
	want := money.MustParse("9000000").Sub(wantPaid).Sub(wantCharges)
	if cur, av := money.MustParse(w["current_balance"].(string)), money.MustParse(w["available_balance"].(string)); !cur.Equal(want) || !av.Equal(want) {
		t.Fatalf("wallet %s / %s, want %s for both (no hold left)", cur, av, want)
	}
	rep, err := storage.CheckLedger(context.Background(), api.Schema.DB)
	if err != nil || !rep.OK {
		t.Fatalf("ledger check: %+v %v", rep, err)
	}
	// The file's rail requests (~60 kB each, all keyed by the file) were published,
	// not refused by Kafka: a refused request is dead-lettered, and the file then
	// completes only through the rail's recovery, late.
	var dead int
	if err := api.Schema.DB.Get(&dead, `SELECT count(*) FROM outbox_dead`); err != nil || dead != 0 {
		t.Fatalf("%d events dead-lettered (%v)", dead, err)
	}
}
