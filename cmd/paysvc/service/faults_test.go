package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/values/money"
	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/cmd/paysvc/service/servicetest/history"
	"paysvc/storage"
	"paysvc/storage/storagetest"
	"paysvc/topics"
)

// faultBundle is an API+relay service without an engine, plus merchants with funded
// wallets; engines come and go around it.
type faultBundle struct {
	api       *servicetest.Env
	merchants []faultMerchant
	// hist, when set, records the load's transfers (and the provisioned
	// balances as their start) for a linearizability check.
	hist *history.Recorder
}

type faultMerchant struct {
	secret  string
	wallets []string
	initial map[string]money.Amount
}

func startAPIOnly(t *testing.T) *servicetest.Env {
	schema := storagetest.New(t)
	cfg := servicetest.Config(t, schema)
	cfg.Roles = []string{service.RoleAPI, service.RoleRelay}
	cfg.API.ReplyTimeout = 3 * time.Second
	env := servicetest.Run(t, schema, cfg)
	t.Cleanup(env.Svc.Close)
	return env
}

// startProcess starts cmd, its output on the test's stderr when PAYSVC_TEST_LOG is
// set, and kills it when the test ends.
func startProcess(t *testing.T, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	if os.Getenv("PAYSVC_TEST_LOG") != "" {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// startEngine runs an engine-only service in this process on the API's Kafka.
func startEngine(t *testing.T, api *servicetest.Env, id string) *service.Service {
	return startRoles(t, api, id, service.RoleEngine)
}

func (fb *faultBundle) provision(t *testing.T, merchants, wallets int) {
	// A careful client: each write has its own Idempotency-Key and is repeated
	// with it while the outcome is unknown (a 5xx while engines start or move).
	careful := func(path string, body map[string]any, key, secret string, want int) servicetest.Response {
		// The caller judges the last answer: Wait, not Eventually.
		var r servicetest.Response
		_ = waittest.Wait(time.Minute, func() (bool, string) {
			r = fb.api.Do("POST", path, body, append(servicetest.Bearer(secret), "Idempotency-Key", key)...)
			return r.Status == want || r.Status < 500 && r.Status != 409, fmt.Sprintf("POST %s: %d %s", path, r.Status, r.Body)
		})
		return r
	}
	for i := 0; i < merchants; i++ {
		m := fb.api.Merchant(fmt.Sprintf("M%d", i))
		fm := faultMerchant{secret: m.SecretKey, initial: map[string]money.Amount{}}
		for j := 0; j < wallets; j++ {
			r := careful("/api/v1/wallets/", map[string]any{"currency": "KES", "wallet_type": "WORKING", "label": fmt.Sprintf("W%d", j)},
				fmt.Sprintf("provision-%d-%d", i, j), m.SecretKey, 201)
			if r.Status != 201 {
				t.Fatalf("create wallet: %d %s", r.Status, r.Body)
			}
			id := r.Map(t)["wallet_id"].(string)
			if r := careful("/api/v1/sandbox/wallets/"+id+"/deposit/", map[string]any{"amount": "100.00"},
				fmt.Sprintf("provision-deposit-%d-%d", i, j), m.SecretKey, 200); r.Status != 200 {
				t.Fatalf("deposit: %d %s", r.Status, r.Body)
			}
			fm.wallets = append(fm.wallets, id)
			fm.initial[id] = money.MustParse("100.00")
			if fb.hist != nil {
				fb.hist.Initial(id, 10000) // the deposit above, acknowledged before the load
			}
		}
		fb.merchants = append(fb.merchants, fm)
	}
}

// load runs n transfers from workers, each with its own Idempotency-Key, retrying
// a key until it gets a definite answer (200 or 400), exactly as a careful client
// would. It returns the model: every wallet's expected balance.
func (fb *faultBundle) load(t *testing.T, n, workers int, progress *atomic.Int64) map[string]money.Amount {
	model := map[string]money.Amount{}
	for _, m := range fb.merchants {
		for w, a := range m.initial {
			model[w] = a
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := atomic.Int64{}
	deadline := time.Now().Add(3 * time.Minute)
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				m := fb.merchants[int(i)%len(fb.merchants)]
				src := m.wallets[int(i/7)%len(m.wallets)]
				dst := m.wallets[int(i/7+1)%len(m.wallets)]
				amount := money.FromUnits(100 + i%50)
				key := fmt.Sprintf("load-%d", i)
				// One operation of the history per key, however often it is sent.
				var op *history.Pending
				if fb.hist != nil {
					op = fb.hist.Begin(w, history.Transfer{From: src, To: dst, Cents: 100 + i%50})
				}
				// A worker is not the test's goroutine: Wait, and Errorf on failure.
				err := waittest.Wait(time.Until(deadline), func() (bool, string) {
					r := fb.api.Do("POST", "/api/v1/wallets/"+src+"/intra_transfer/",
						map[string]any{"wallet_id": dst, "amount": amount.String(), "narrative": "fault load"},
						append(servicetest.Bearer(m.secret), "Idempotency-Key", key)...)
					if r.Status == 200 {
						if op != nil {
							op.Ok()
						}
						mu.Lock()
						model[src] = model[src].Sub(amount)
						model[dst] = model[dst].Add(amount)
						mu.Unlock()
						return true, ""
					}
					if r.Status == 400 {
						if op != nil {
							op.Refused()
						}
						return true, "" // refused (insufficient funds): no effect
					}
					return false, fmt.Sprintf("transfer %d: last %d", i, r.Status) // 5xx or 409: outcome unknown or in flight, retry the same key
				})
				if err != nil {
					if op != nil {
						op.Unknown()
					}
					t.Errorf("transfer %d never got a definite answer", i)
					return
				}
				progress.Add(1)
			}
		})
	}
	wg.Wait()
	return model
}

func (fb *faultBundle) verify(t *testing.T, model map[string]money.Amount) {
	for _, m := range fb.merchants {
		for _, w := range m.wallets {
			r := fb.api.Do("GET", "/api/v1/wallets/"+w+"/", nil, servicetest.Bearer(m.secret)...)
			if got := r.Map(t)["current_balance"]; got != model[w].String() {
				t.Errorf("wallet %s holds %v, model says %s", w, got, model[w])
			}
		}
	}
	rep, err := storage.CheckLedger(context.Background(), fb.api.Schema.DB)
	if err != nil || !rep.OK {
		t.Fatalf("ledger check: %+v %v", rep, err)
	}
	// Every applied command appears once, and each transfer made exactly two entries.
	var dupes int
	if err := fb.api.Schema.DB.Get(&dupes, `SELECT count(*) FROM (SELECT command_id FROM ledger_entries
		GROUP BY command_id, account HAVING count(*) > 1) d`); err != nil || dupes != 0 {
		t.Fatalf("commands applied twice: %d (%v)", dupes, err)
	}
}

// readBalances reads a random wallet's balance every 20-40 ms until ctx ends, each
// once (no retry), recorded in fb.hist as client: the balance, or unknown when the
// read failed.
func (fb *faultBundle) readBalances(ctx context.Context, client int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 41))
	hc := &http.Client{Timeout: 5 * time.Second}
	read := func(secret, wallet string) (int64, error) {
		req, err := http.NewRequestWithContext(ctx, "GET", fb.api.BaseURL+"/api/v1/wallets/"+wallet+"/", nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		var w struct {
			Balance string `json:"current_balance"`
		}
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("status %d", resp.StatusCode)
		}
		if err := json.NewDecoder(resp.Body).Decode(&w); err != nil {
			return 0, err
		}
		a, err := money.Parse(w.Balance)
		if err != nil {
			return 0, err
		}
		return a.Cents()
	}
	for ctx.Err() == nil {
		m := fb.merchants[rng.IntN(len(fb.merchants))]
		w := m.wallets[rng.IntN(len(m.wallets))]
		op := fb.hist.Begin(client, history.Read{Wallet: w})
		if cents, err := read(m.secret, w); err != nil {
			op.Unknown()
		} else {
			op.Balance(cents)
		}
		time.Sleep(time.Duration(20+rng.IntN(20)) * time.Millisecond) // the reader's pace: it shapes the load, it waits for nothing
	}
}

// waitFor waits until the load has made n transfers.
func waitFor(t *testing.T, p *atomic.Int64, n int64) {
	t.Helper()
	waittest.Eventually(t, time.Minute, func() (bool, string) {
		return p.Load() >= n, fmt.Sprintf("load stalled at %d", p.Load())
	})
}

// Stop the engine in the middle of a load and start another: nothing acknowledged
// is lost, nothing is applied twice, the ledger still balances.
func TestEngineRestartMidLoad(t *testing.T) {
	t.Parallel()
	fb := &faultBundle{api: startAPIOnly(t)}
	e1 := startEngine(t, fb.api, "engine-1")
	fb.provision(t, 3, 4)

	var progress atomic.Int64
	done := make(chan map[string]money.Amount)
	go func() { done <- fb.load(t, 600, 16, &progress) }()
	waitFor(t, &progress, 150)
	// Commands pile up in Kafka while no engine runs: the next engine starts once
	// the command log has grown past where it stood when the first one stopped.
	cl, err := kgo.NewClient(kgo.SeedBrokers(fb.api.Svc.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	logged := func() int64 {
		ends, err := adm.ListEndOffsets(context.Background(), fb.api.Config.KafkaNamespace.Topic(topics.CommandsTopic))
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
		return n
	}
	e1.Close()
	stopped := logged()
	waittest.Eventually(t, 30*time.Second, func() (bool, string) {
		n := logged()
		return n > stopped, fmt.Sprintf("no command reached the log after the engine stopped (%d logged)", n)
	})
	e2 := startEngine(t, fb.api, "engine-2")
	defer e2.Close()
	model := <-done
	fb.verify(t, model)
}

// Two engine processes share the partitions through one consumer group; one is
// killed with SIGKILL mid-load and the other takes its partitions over.
func TestEngineProcessKilled(t *testing.T) {
	t.Parallel()
	bin := servicetest.BuildBinary(t)
	fb := &faultBundle{api: startAPIOnly(t)}
	spawn := func(id string) *exec.Cmd {
		cmd := exec.Command(bin, "serve", "--roles", "engine")
		cmd.Env = append(os.Environ(),
			"PAYSVC_DATABASE_URL="+fb.api.Schema.URL,
			"PAYSVC_KAFKA_BROKERS="+fb.api.Svc.Brokers[0],
			"PAYSVC_KAFKA_NAMESPACE="+string(fb.api.Config.KafkaNamespace),
			"PAYSVC_HTTP_ADDR=127.0.0.1:0", "PAYSVC_ADMIN_ADDR=127.0.0.1:0",
			"PAYSVC_ENGINE_SESSION_TIMEOUT=2s",
			"PAYSVC_INSTANCE_ID="+id,
			"PAYSVC_LOG_LEVEL=info",
			fmt.Sprintf("PAYSVC_COMMAND_PARTITIONS=%d", fb.api.Config.CommandPartitions),
		)
		logf, err := os.Create(filepath.Join(t.TempDir(), id+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		return startProcess(t, cmd)
	}
	e1 := spawn("proc-engine-1")
	spawn("proc-engine-2")
	// Both processes must own partitions before one dies, or the test proves nothing.
	// They claim them on assignment, before any command: waiting first also keeps
	// the provisioning below (3 s reply timeout) out of the two start-up rebalances,
	// which a loaded CI machine can stretch past it.
	waittest.Eventually(t, 30*time.Second, func() (bool, string) {
		var owners int
		if err := fb.api.Schema.DB.Get(&owners, `SELECT count(DISTINCT owner) FROM partition_offsets`); err != nil {
			t.Fatal(err)
		}
		return owners == 2, fmt.Sprintf("the two engines never shared the partitions (%d owners)", owners)
	})
	fb.hist = history.NewRecorder()
	fb.provision(t, 6, 3)

	var progress atomic.Int64
	done := make(chan map[string]money.Amount)
	go func() { done <- fb.load(t, 600, 16, &progress) }()
	// Two readers beside the 16 transfer workers (history clients 16 and 17).
	readCtx, stopReads := context.WithCancel(context.Background())
	var readers sync.WaitGroup
	for r := range 2 {
		readers.Go(func() { fb.readBalances(readCtx, 16+r, uint64(r)) })
	}
	waitFor(t, &progress, 150)
	if err := e1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	model := <-done
	stopReads()
	readers.Wait()
	fb.verify(t, model)
	rep, err := fb.hist.Check(60 * time.Second)
	t.Logf("history: %d operations, %d partitions, %d unknown, checked in %s", rep.Operations, rep.Partitions, rep.Unknown,
		rep.Took.Round(time.Millisecond))
	if err != nil {
		t.Errorf("the clients' history is not linearizable: %v", err)
	}
	var owners []string
	if err := fb.api.Schema.DB.Select(&owners, `SELECT DISTINCT owner FROM partition_offsets`); err != nil {
		t.Fatal(err)
	}
	if len(owners) != 1 || owners[0] != "proc-engine-2" {
		t.Fatalf("after the kill the survivor should own every partition, owners: %v", owners)
	}
}

// The database drops every connection of the service, again and again, in the
// middle of a load (as a restart or failover does): nothing acknowledged is lost, nothing is
// applied twice, and clients that retry with their Idempotency-Key get definite
// answers.
func TestDatabaseConnectionsKilledMidLoad(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) { c.API.ReplyTimeout = 3 * time.Second })
	fb := &faultBundle{api: env}
	fb.provision(t, 3, 4)
	admin, err := storage.Open(context.Background(), storagetest.URL(t), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	var progress atomic.Int64
	done := make(chan map[string]money.Amount)
	go func() { done <- fb.load(t, 600, 16, &progress) }()
	// From the 100th to the 400th transfer, every 30 ms: connections die in the
	// middle of batch commits, reads and idempotency writes, not only while idle.
	// At most for 20 s: on a machine so loaded that reconnecting takes longer than
	// the interval, the kills alone would keep the load from ever reaching 400.
	killed := 0
	waitFor(t, &progress, 100)
	for killUntil := time.Now().Add(20 * time.Second); progress.Load() < 400 && time.Now().Before(killUntil); {
		var n int
		if err := admin.Get(&n, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`,
			env.Schema.Name); err != nil {
			t.Fatal(err)
		}
		killed += n
		time.Sleep(30 * time.Millisecond) // the fault injector's pace: a kill every 30 ms is what is tested

	}
	t.Logf("killed %d connections until transfer %d", killed, progress.Load())
	model := <-done
	if killed == 0 {
		t.Fatal("no connection was killed: the test proved nothing")
	}
	fb.verify(t, model)
}

// Two dispatcher processes share the event topics; one is SIGKILLed mid-stream.
// Every event is delivered; a duplicate can only repeat a webhook-id.
func TestDispatcherProcessKilled(t *testing.T) {
	t.Parallel()
	bin := servicetest.BuildBinary(t)
	var mu sync.Mutex
	seen := map[string]int{}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("webhook-id")]++
		mu.Unlock()
	}))
	defer receiver.Close()

	schema := storagetest.New(t)
	cfg := servicetest.Config(t, schema)
	cfg.Roles = []string{service.RoleAPI, service.RoleEngine, service.RoleRelay}
	cfg.API.WebhookAllowPrivate = true
	env := servicetest.Run(t, schema, cfg)
	t.Cleanup(env.Svc.Close)
	m := env.Merchant("Hooks")
	if r := env.Do("POST", "/api/v1/webhooks/", map[string]any{"endpoint": receiver.URL + "/hook", "challenge": "secret-123",
		"wallet_transfer_event": true}, servicetest.Bearer(m.SecretKey)...); r.Status != 201 {
		t.Fatalf("webhook: %d %s", r.Status, r.Body)
	}
	spawn := func(id string) *exec.Cmd {
		cmd := exec.Command(bin, "serve", "--roles", "dispatcher")
		cmd.Env = append(os.Environ(), "PAYSVC_DATABASE_URL="+schema.URL, "PAYSVC_KAFKA_BROKERS="+env.Svc.Brokers[0],
			"PAYSVC_KAFKA_NAMESPACE="+string(cfg.KafkaNamespace),
			"PAYSVC_HTTP_ADDR=127.0.0.1:0", "PAYSVC_ADMIN_ADDR=127.0.0.1:0", "PAYSVC_INSTANCE_ID="+id, "PAYSVC_LOG_LEVEL=warn", "PAYSVC_SMTP_SINK_ADDR=127.0.0.1:0",
			"PAYSVC_WEBHOOK_ALLOW_PRIVATE=true", "PAYSVC_WEBHOOK_LEASE=2s", "PAYSVC_ENGINE_SESSION_TIMEOUT=2s")
		return startProcess(t, cmd)
	}
	d1 := spawn("dispatcher-1")
	spawn("dispatcher-2")
	// Both dispatchers must share the event partitions before one dies, or the test
	// proves nothing (as in TestEngineProcessKilled). Killing one while the group is
	// still forming also hit a kfake bug: the survivor was dropped while waiting in
	// JoinGroup and ingested nothing until its join timed out (see ingest.go).
	waitForGroup(t, env.Svc.Brokers, cfg.KafkaNamespace.Group("paysvc-dispatcher"), 2)

	settlement := env.Settlement(servicetest.Bearer(m.SecretKey))
	r := env.Do("POST", "/api/v1/wallets/", map[string]any{"currency": "KES", "label": "Dest"}, servicetest.Bearer(m.SecretKey)...)
	dest := r.Map(t)["wallet_id"].(string)
	env.Do("POST", "/api/v1/sandbox/wallets/"+settlement+"/deposit/", map[string]any{"amount": "1000.00"}, servicetest.Bearer(m.SecretKey)...)
	const n = 150
	for i := 0; i < n; i++ {
		if i == n/3 {
			_ = d1.Process.Signal(syscall.SIGKILL)
		}
		r := env.Do("POST", "/api/v1/wallets/"+settlement+"/intra_transfer/", map[string]any{"wallet_id": dest, "amount": "1.00",
			"narrative": "hook"}, servicetest.Bearer(m.SecretKey)...)
		if r.Status != 200 {
			t.Fatalf("transfer %d: %d %s", i, r.Status, r.Body)
		}
	}
	// Done when the receiver has every event and the dispatcher has recorded each
	// delivery (the receiver answers before the outcome is written).
	// Wait, not Eventually: the failure's description costs queries.
	if err := waittest.Wait(60*time.Second, func() (bool, string) {
		mu.Lock()
		distinct := len(seen)
		mu.Unlock()
		var delivered int
		if err := schema.DB.Get(&delivered, `SELECT count(*) FROM webhook_deliveries WHERE status = 'DELIVERED'`); err != nil {
			t.Fatal(err)
		}
		return distinct == n && delivered == n, fmt.Sprintf("%d of %d events delivered", distinct, n)
	}); err != nil {
		var rows []struct {
			Status string `db:"status"`
			N      int    `db:"n"`
		}
		_ = schema.DB.Select(&rows, `SELECT status, count(*) AS n FROM webhook_deliveries GROUP BY status`)
		var outbox int
		_ = schema.DB.Get(&outbox, `SELECT count(*) FROM outbox`)
		t.Fatalf("%v; deliveries by status %+v; outbox backlog %d", err, rows, outbox)
	}
	var records int
	if err := schema.DB.Get(&records, `SELECT count(*) FROM webhook_deliveries`); err != nil || records != n {
		t.Fatalf("%d delivery records, want %d (%v)", records, n, err)
	}
}

// waitForGroup waits until the consumer group is stable with members members, each
// assigned at least one partition.
func waitForGroup(t *testing.T, brokers []string, group string, members int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	waittest.Eventually(t, 30*time.Second, func() (bool, string) {
		ready := 0
		if gs, err := adm.DescribeGroups(context.Background(), group); err == nil {
			if g, ok := gs[group]; ok && g.State == "Stable" {
				for _, m := range g.Members {
					if a, ok := m.Assigned.AsConsumer(); ok && len(a.Topics) > 0 {
						ready++
					}
				}
			}
		}
		return ready == members, fmt.Sprintf("group %s never had %d members sharing the partitions (%d had some)", group, members, ready)
	})
}
