package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/aggregates/wallet/walletstore"
	"paysvc/actors/values/money"
	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/admin"
	"paysvc/cmd/paysvc/service/servicetest/history"
	"paysvc/storage"
	"paysvc/storage/storagetest"
	"paysvc/topics"
)

// The cluster test's shape and pace. The load is kept low (a few closed-loop
// clients) so the test fits in about four minutes on a shared 2-core machine,
// three Kafka JVMs included.
const (
	clusterFaultPhase = 60 * time.Second // at least; on Apache Kafka until every broker fault is done
	// The fault phase ends at clusterFaultMax once the broker faults' plan is
	// done, else when it is (the plan is what the test proves), at most at
	// clusterFaultHardMax; the process kills go on meanwhile.
	// The five faults take about two minutes; a node's restart took over a minute
	// on a host loaded to 38 by other tests, and then only four fit in five.
	clusterFaultMax     = 300 * time.Second
	clusterFaultHardMax = 600 * time.Second
	clusterKillEvery    = 3 * time.Second // on average (uniform 2-4 s)
	clusterSettle       = 2 * time.Minute // at most, after the faults, for the backlog to drain
	clusterTermDeadline = 20 * time.Second
	clusterRestartDelay = 300 * time.Millisecond
	clusterTransferPace = 100 * time.Millisecond
	clusterReadPace     = 100 * time.Millisecond // to twice this, at random
	clusterSTKPace      = 300 * time.Millisecond
	clusterFileEvery    = 15 * time.Second
	clusterFileSize     = 10
	clusterCommandLimit = 90 * time.Second // a careful client's patience for one command
	clusterCheckTimeout = 60 * time.Second // porcupine's search over the whole history

	// Broker faults (Apache Kafka only), one at a time: a stopped node is started
	// again after clusterBrokerDown, and the next fault waits until the cluster
	// has it back in every partition's ISR (at most clusterBrokerBack) and then
	// clusterBrokerGap more.
	clusterBrokerDown   = time.Second
	clusterBrokerBack   = 90 * time.Second
	clusterBrokerGap    = 2 * time.Second
	clusterMinorityDown = 8 * time.Second // all nodes but one stopped at once
	clusterWindowProbes = 3               // per merchant: fresh transfers sent meanwhile
	clusterKafkaNodes   = 3
)

// clusterKafkaEnv chooses the cluster test's Kafka: unset (or anything but
// "kfake"), a private 3-node Apache Kafka cluster of its own started with
// ops/kafka/kafka.sh; "kfake", one `paysvc broker` process (franz-go's kfake), as
// before there was a real cluster.
const clusterKafkaEnv = "PAYSVC_TEST_KAFKA"

// clusterReadinessPath is what the test asks every process's admin listener before
// and after the faults: 200 only when the process can do its roles' work
// (database, broker, and for an engine its partitions claimed).
const clusterReadinessPath = "/readyz"

// clusterNamespace is the processes' Kafka namespace (PAYSVC_KAFKA_NAMESPACE),
// set so that one inherited from the environment cannot move their topics: the
// cluster is the test's own, so none.
const clusterNamespace topics.Namespace = ""

// clusterEngineGroup is the engines' consumer group (actors/engine), whose
// coordinator the test kills.
var clusterEngineGroup = clusterNamespace.Group("paysvc-engine")

// clusterCommandsTopic is the command topic, whose partition leaders the test kills.
var clusterCommandsTopic = clusterNamespace.Topic(topics.CommandsTopic)

// TestClusterUnderKills runs the production shape as real processes (a private
// 3-node Apache Kafka cluster, two api, engine, relay, rails and dispatcher
// processes, one PostgreSQL) under mixed load (transfers, balance reads, STK
// collections through the sandbox simulator, payment files, webhooks to a local
// receiver) while a random process is killed every few seconds, mostly with
// SIGKILL and every third time with SIGTERM, and restarted. Beside them, one at a
// time, the Kafka nodes are killed and started again: the leader of a merchant's
// command partition and the engines' group coordinator, each with SIGKILL and with
// SIGTERM, any node not hit yet, and once every node but one for a few seconds,
// while which no write may be acknowledged. Afterwards every acknowledged command
// was applied exactly once, every event reached its webhook at least once and in
// order per aggregate, the ledger balances, every process is ready, and what the
// clients saw (transfers and reads) is linearizable.
//
// PAYSVC_TEST_KAFKA=kfake runs it on one `paysvc broker` process instead, killed
// like the others.
func TestClusterUnderKills(t *testing.T) {
	t.Parallel()
	started := time.Now()
	used := map[int]bool{}
	var kc *kafkaNodes
	if os.Getenv(clusterKafkaEnv) != "kfake" {
		kc = newKafkaNodes(t, used)
	}
	// The binary builds while the Kafka nodes start.
	bin := filepath.Join(t.TempDir(), "paysvc")
	built := make(chan error, 1)
	go func() {
		out, err := exec.Command("go", "build", "-o", bin, "paysvc/cmd/paysvc").CombinedOutput()
		if err != nil {
			err = fmt.Errorf("build: %v\n%s", err, out)
		}
		built <- err
	}()
	t.Cleanup(func() {
		if built != nil {
			<-built // before the temporary directory goes
		}
	})
	if kc != nil {
		kc.start(t)
		t.Logf("kafka: %d Apache Kafka nodes up after %s: %s", kc.nodes, time.Since(started).Round(time.Millisecond), kc.bootstrap)
	}
	err := <-built
	built = nil
	if err != nil {
		t.Fatal(err)
	}
	schema := storagetest.New(t)
	rec := newHookRecorder()
	receiver := httptest.NewServer(rec)
	t.Cleanup(receiver.Close)

	cl := startCluster(t, bin, schema.URL, kc, used)
	t.Logf("cluster of %d processes ready after %s", len(cl.procs), time.Since(started).Round(time.Millisecond))

	// Merchants, their wallets, deposits and webhooks: through the API, as a careful
	// client (every write retried with its Idempotency-Key until a definite answer).
	// The working wallets the transfers move money between are the history's
	// model; the settlement wallets, which collections and payment files move, are
	// kept out of it.
	ctx := context.Background()
	hist := history.NewRecorder()
	var ms []*clusterMerchant
	for i := range 2 {
		m, err := admin.CreateMerchant(ctx, schema.DB, fmt.Sprintf("Cluster %d", i), "sandbox")
		if err != nil {
			t.Fatal(err)
		}
		settlement, err := walletstore.Settlement(ctx, schema.DB, m.MerchantID, "KES")
		if err != nil {
			t.Fatal(err)
		}
		cm := &clusterMerchant{id: m.MerchantID, c: cl.client(m.SecretKey), settlement: settlement.WalletID, model: map[string]money.Amount{},
			hist: hist}
		if _, err := cm.c.do(ctx, "POST", "/api/v1/webhooks/", map[string]any{"endpoint": fmt.Sprintf("%s/hook/%d", receiver.URL, i),
			"challenge": fmt.Sprintf("cluster-challenge-%d", i), "wallet_transfer_event": true, "collection_event": true,
			"send_money_event": true}, fmt.Sprintf("setup-hook-%d", i)); err != nil {
			t.Fatalf("create webhook: %v", err)
		}
		if _, err := cm.c.do(ctx, "POST", "/api/v1/sandbox/wallets/"+cm.settlement+"/deposit/", map[string]any{"amount": "100000.00"},
			fmt.Sprintf("setup-deposit-%d", i)); err != nil {
			t.Fatalf("deposit: %v", err)
		}
		for j := range 3 {
			w, err := cm.c.do(ctx, "POST", "/api/v1/wallets/", map[string]any{"currency": "KES", "label": fmt.Sprintf("W%d", j)},
				fmt.Sprintf("setup-wallet-%d-%d", i, j))
			if err != nil {
				t.Fatalf("create wallet: %v", err)
			}
			id := w["wallet_id"].(string)
			deposit := money.MustParse("10000.00")
			if _, err := cm.c.do(ctx, "POST", "/api/v1/sandbox/wallets/"+id+"/deposit/", map[string]any{"amount": deposit.String()},
				fmt.Sprintf("setup-deposit-%d-%d", i, j)); err != nil {
				t.Fatalf("deposit: %v", err)
			}
			cm.wallets = append(cm.wallets, id)
			cm.model[id] = deposit
			// Acknowledged before any client of the history starts: its balance then.
			hist.Initial(id, mustCents(t, deposit))
		}
		ms = append(ms, cm)
	}
	t.Logf("provisioned after %s", time.Since(started).Round(time.Millisecond))

	// The load runs until the fault phase ends; the killers run beside it. Clients
	// of the history: 0-3 the transfer clients, 4-5 the readers, 6-11 the minority
	// window's probes.
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var load sync.WaitGroup
	for mi, m := range ms {
		for k := range 2 { // two transfer clients per merchant, each from its own wallet
			load.Go(func() { m.runTransfers(t, loadCtx, k, 2*mi+k) })
		}
		load.Go(func() { m.runReads(loadCtx, 2*len(ms)+mi, uint64(started.UnixNano())+uint64(mi)) })
	}
	load.Go(func() { ms[0].runCollections(t, loadCtx) })
	load.Go(func() { ms[1].runFiles(t, loadCtx) })
	faultStart := time.Now()
	seed := uint64(faultStart.UnixNano())
	var (
		kills  []clusterKill
		faults []brokerFault
		killer sync.WaitGroup
	)
	killer.Go(func() { kills = cl.killRandomly(t, loadCtx, seed) })
	planDone := make(chan struct{})
	if kc != nil {
		go func() {
			defer close(planDone)
			faults = cl.breakBrokers(t, loadCtx, seed, ms)
		}()
	} else {
		close(planDone)
	}
	// The fault phase: at least clusterFaultPhase, until every broker fault is
	// done and every process was killed; at clusterFaultMax if the broker faults
	// are done, else when they are, at most clusterFaultHardMax.
	// Reaching clusterFaultHardMax ends the phase too: Wait's error is not a failure.
	_ = waittest.Wait(clusterFaultHardMax-time.Since(faultStart), func() (bool, string) {
		elapsed := time.Since(faultStart)
		done := false
		select {
		case <-planDone:
			done = true
		default:
		}
		return elapsed >= clusterFaultMax && done ||
			elapsed >= clusterFaultPhase && done && len(cl.neverKilled()) == 0, "fault phase not over"
	})
	stopLoad()
	killer.Wait()
	<-planDone // a broker fault in progress ends with its nodes started again
	cl.probes.Wait()
	load.Wait()
	t.Logf("fault phase over after %s (%d process kills, %d broker faults); settling", time.Since(faultStart).Round(time.Millisecond),
		len(kills), len(faults))

	// Settle: every process up and ready, every Kafka node back, every
	// acknowledged collection and file final, every event delivered.
	settleStart := time.Now()
	var why string
	_ = waittest.Wait(clusterSettle, func() (bool, string) { // Wait: the logs are dumped before failing
		why = cl.notSettled(ctx, schema, ms, rec)
		return why == "", why
	})
	settled := time.Since(settleStart)
	if why != "" {
		cl.dumpLogs(t)
		t.Fatalf("not settled %s after the faults: %s", clusterSettle, why)
	}

	// Exactly once, money and ledger.
	f := verifyCluster(t, ctx, cl, schema, ms, rec, kills)
	f.faults = faults
	if kc != nil {
		checkBrokerFaults(t, kc, faults)
	}
	f.window = cl.window.snapshot()
	for _, bad := range f.window.bad {
		t.Error(bad)
	}
	if kc != nil && len(f.window.answers) == 0 && slices.ContainsFunc(faults, func(b brokerFault) bool { return b.kind == "minority" }) {
		t.Errorf("no write was answered while all Kafka nodes but one were down (%s): the window proved nothing", clusterMinorityDown)
	}

	// What the clients saw: linearizable against one copy of the wallets.
	f.hist, err = hist.Check(clusterCheckTimeout)
	if err != nil {
		t.Errorf("the clients' history (%d operations, %d unknown) is not linearizable: %v", f.hist.Operations, f.hist.Unknown, err)
	}
	for _, m := range ms {
		f.readsOK += int(m.readsOK.Load())
		f.readsUnknown += int(m.readsUnknown.Load())
	}
	f.settle, f.total = settled, time.Since(started)
	f.retried = cl.retried.Load()
	cl.unknownMu.Lock()
	f.unknown = maps.Clone(cl.unknown)
	cl.unknownMu.Unlock()
	f.starts = cl.starts()
	f.report(t)
}

func mustCents(t *testing.T, a money.Amount) int64 {
	t.Helper()
	c, err := a.Cents()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// clusterProc is one supervised process: restarted whenever it exits, as an
// orchestrator with restart policy "always" would.
type clusterProc struct {
	name, role  string
	args, env   []string
	http, admin string // listen addresses ("" for the broker's admin)
	logPath     string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the current cmd has exited
	starts  int
	running bool
}

type clusterKill struct {
	proc   string
	signal string
	drain  time.Duration // SIGTERM: signal to exit
	forced bool          // SIGTERM not obeyed within clusterTermDeadline
}

type cluster struct {
	t        *testing.T
	bin      string
	procs    []*clusterProc
	brokers  string      // the bootstrap list every process is given
	kafka    *kafkaNodes // nil on kfake: then procs holds the broker
	apis     []string
	stop     atomic.Bool
	wg       sync.WaitGroup
	retried  atomic.Int64 // requests sent again after an unknown outcome
	window   minorityWindow
	probes   sync.WaitGroup // the minority window's probes
	probeSeq atomic.Int64

	unknownMu sync.Mutex
	unknown   map[string]int // unknown outcomes by kind: transport, 503, 504, 409...

	killedMu sync.Mutex
	killed   map[string]int // process kills so far, by process
}

func (cl *cluster) sawUnknown(kind string) {
	cl.unknownMu.Lock()
	defer cl.unknownMu.Unlock()
	if cl.unknown == nil {
		cl.unknown = map[string]int{}
	}
	cl.unknown[kind]++
}

func (cl *cluster) sawKill(proc string) {
	cl.killedMu.Lock()
	defer cl.killedMu.Unlock()
	if cl.killed == nil {
		cl.killed = map[string]int{}
	}
	cl.killed[proc]++
}

// neverKilled are the processes not killed yet.
func (cl *cluster) neverKilled() []string {
	cl.killedMu.Lock()
	defer cl.killedMu.Unlock()
	var out []string
	for _, p := range cl.procs {
		if cl.killed[p.name] == 0 {
			out = append(out, p.name)
		}
	}
	return out
}

// starts are the processes' starts beyond the first and beyond one per kill: the
// times a process exited without being killed (a process whose broker is down at
// start exits, and is started again).
func (cl *cluster) starts() map[string]int {
	cl.killedMu.Lock()
	defer cl.killedMu.Unlock()
	out := map[string]int{}
	for _, p := range cl.procs {
		p.mu.Lock()
		if extra := p.starts - 1 - cl.killed[p.name]; extra > 0 {
			out[p.name] = extra
		}
		p.mu.Unlock()
	}
	return out
}

// freePort picks a free port below Linux's ephemeral range (32768-60999 by
// default). A killed process is started again on the same ports, so they must stay
// free while it is down: a port from the ephemeral range could meanwhile become
// the source port of some client's connection or another test's listener (port 0),
// and the restart would fail to listen.
func freePort(t *testing.T, used map[int]bool) int {
	t.Helper()
	for range 1000 {
		port := 20000 + rand.IntN(12000)
		if used[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		used[port] = true
		return port
	}
	t.Fatal("no free port in 20000-31999")
	return 0
}

// startCluster starts the ten role processes (and on kfake the broker) and waits
// until every one is ready.
func startCluster(t *testing.T, bin, dbURL string, kc *kafkaNodes, used map[int]bool) *cluster {
	cl := &cluster{t: t, bin: bin, kafka: kc}
	if kc != nil {
		cl.brokers = kc.bootstrap
	} else {
		cl.brokers = fmt.Sprintf("127.0.0.1:%d", freePort(t, used))
	}
	logs := t.TempDir()
	if dir := os.Getenv("PAYSVC_TEST_CLUSTER_LOGS"); dir != "" { // kept after the test, for a look at a run
		logs = dir
		if err := os.MkdirAll(logs, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	common := []string{
		"PAYSVC_DATABASE_URL=" + dbURL, "PAYSVC_KAFKA_BROKERS=" + cl.brokers, "PAYSVC_COMMAND_PARTITIONS=4",
		"PAYSVC_KAFKA_NAMESPACE=" + string(clusterNamespace),
		"PAYSVC_LOG_LEVEL=info", "PAYSVC_LOG_FORMAT=json", "PAYSVC_ENGINE_SESSION_TIMEOUT=3s",
		"PAYSVC_SMTP_SINK_ADDR=127.0.0.1:0", "PAYSVC_RATE_LIMIT=0", "PAYSVC_RATE_LIMIT_IP=0", "PAYSVC_RATE_LIMIT_CALLBACKS=0",
		"PAYSVC_REPLY_TIMEOUT=5s",
		"PAYSVC_SIM_ACCEPT_DELAY=50ms", "PAYSVC_SIM_FINAL_DELAY=100ms", "PAYSVC_SIM_RECOVER_AFTER=3s",
		"PAYSVC_SIM_PAYOUT_DELAY=200ms", "PAYSVC_PAYOUT_RECOVER_AFTER=5s",
		"PAYSVC_WEBHOOK_ALLOW_PRIVATE=true", "PAYSVC_WEBHOOK_LEASE=2s", "PAYSVC_WEBHOOK_RETRY_BASE=200ms",
		"PAYSVC_WEBHOOK_RETRY_MAX=2s", "PAYSVC_WEBHOOK_MAX_ATTEMPTS=100", "PAYSVC_WEBHOOK_FAILURE_THRESHOLD=100000",
	}
	if kc == nil {
		brokerDir := t.TempDir()
		cl.procs = append(cl.procs, &clusterProc{name: "broker", role: "broker",
			args: []string{"broker", "--port", strings.TrimPrefix(cl.brokers, "127.0.0.1:"), "--data-dir", brokerDir},
			env:  common, logPath: filepath.Join(logs, "broker.log")})
	}
	for _, role := range []string{"api", "engine", "relay", "rails", "dispatcher"} {
		for n := 1; n <= 2; n++ {
			p := &clusterProc{name: fmt.Sprintf("%s-%d", role, n), role: role, args: []string{"serve", "--roles", role},
				http: fmt.Sprintf("127.0.0.1:%d", freePort(t, used)), admin: fmt.Sprintf("127.0.0.1:%d", freePort(t, used))}
			p.env = append(slices.Clone(common), "PAYSVC_INSTANCE_ID="+p.name, "PAYSVC_HTTP_ADDR="+p.http,
				"PAYSVC_ADMIN_ADDR="+p.admin, "PAYSVC_DATA_DIR="+t.TempDir())
			p.logPath = filepath.Join(logs, p.name+".log")
			if role == "api" {
				cl.apis = append(cl.apis, "http://"+p.http)
			}
			cl.procs = append(cl.procs, p)
		}
	}
	t.Cleanup(func() {
		cl.stop.Store(true)
		for _, p := range cl.procs {
			p.signal(syscall.SIGKILL)
		}
		cl.wg.Wait()
	})
	for _, p := range cl.procs {
		cl.supervise(p)
	}
	var notReady []string
	if err := waittest.Wait(90*time.Second, func() (bool, string) { // Wait: the logs are dumped before failing
		notReady = cl.notReady()
		return len(notReady) == 0, fmt.Sprintf("%v", notReady)
	}); err != nil {
		cl.dumpLogs(t)
		t.Fatalf("not ready after 90 s: %v", notReady)
	}
	return cl
}

// supervise starts p and starts it again whenever it exits, until the test ends. A
// paysvc process whose broker is down exits at start; it is simply started again.
func (cl *cluster) supervise(p *clusterProc) {
	cl.wg.Go(func() {
		for !cl.stop.Load() {
			logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
			if err != nil {
				cl.t.Errorf("%s: %v", p.name, err)
				return
			}
			cmd := exec.Command(cl.bin, p.args...)
			cmd.Env = append(os.Environ(), p.env...)
			cmd.Stdout, cmd.Stderr = logf, logf
			exited := make(chan struct{})
			p.mu.Lock()
			if cl.stop.Load() {
				p.mu.Unlock()
				logf.Close()
				return
			}
			if err := cmd.Start(); err != nil {
				p.mu.Unlock()
				logf.Close()
				cl.t.Errorf("start %s: %v", p.name, err)
				return
			}
			p.cmd, p.exited, p.running = cmd, exited, true
			p.starts++
			p.mu.Unlock()
			_ = cmd.Wait()
			logf.Close()
			p.mu.Lock()
			p.running = false
			p.mu.Unlock()
			close(exited)
			time.Sleep(clusterRestartDelay) // the supervisor's restart delay, as an init system's: part of the fault, not a wait
		}
	})
}

// signal sends sig to p's current process; it returns the channel closed at its
// exit, or nil when none is running.
func (p *clusterProc) signal(sig syscall.Signal) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return nil
	}
	return p.exited
}

// ready asks p whether it is ready: the admin listener's readiness path for a role
// process, a metadata request for the kfake broker.
func (cl *cluster) ready(p *clusterProc) bool {
	if p.role == "broker" {
		kc, err := kgo.NewClient(kgo.SeedBrokers(cl.brokers), kgo.DialTimeout(time.Second))
		if err != nil {
			return false
		}
		defer kc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err = kadm.NewClient(kc).ListTopics(ctx)
		return err == nil
	}
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get("http://" + p.admin + clusterReadinessPath)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// notReady names the processes that are not ready, and the Kafka cluster when it
// is not whole (a node down, a partition without its leader or short of its ISR).
func (cl *cluster) notReady() []string {
	var out []string
	for _, p := range cl.procs {
		if !cl.ready(p) {
			out = append(out, p.name)
		}
	}
	if cl.kafka != nil {
		if why := cl.kafka.notWhole(context.Background()); why != "" {
			out = append(out, "kafka ("+why+")")
		}
	}
	return out
}

// killRandomly kills one process every 2-4 s until ctx ends: the processes in a
// random order, round after round, so every one (on kfake the broker included) dies
// at least once; every third kill is a SIGTERM, whose drain (signal to exit) is measured
// beside the schedule, so a slow drain does not hold the next kills back.
func (cl *cluster) killRandomly(t *testing.T, ctx context.Context, seed uint64) []clusterKill {
	rng := rand.New(rand.NewPCG(seed, 23))
	t.Logf("kill schedule seed %d", seed)
	var (
		mu       sync.Mutex
		kills    []clusterKill
		draining = map[*clusterProc]bool{}
		drains   sync.WaitGroup
	)
	var order []*clusterProc
	for n := 0; ; n++ {
		wait := clusterKillEvery/2 + time.Duration(rng.Int64N(int64(clusterKillEvery)))
		select {
		case <-ctx.Done():
			drains.Wait()
			return kills
		case <-time.After(wait): // the kill schedule's pace: the fault injector, not a wait
		}
		if len(order) == 0 {
			order = slices.Clone(cl.procs)
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		p := order[0]
		mu.Lock()
		busy := draining[p]
		mu.Unlock()
		if busy {
			order = append(order[1:], p) // its turn comes again after the others'
			continue
		}
		order = order[1:]
		k := clusterKill{proc: p.name, signal: "SIGKILL"}
		sig := syscall.SIGKILL
		if n%3 == 2 {
			k.signal, sig = "SIGTERM", syscall.SIGTERM
		}
		sent := time.Now()
		exited := p.signal(sig)
		if exited == nil {
			continue // still restarting from an earlier kill: nothing to kill
		}
		if sig == syscall.SIGKILL {
			<-exited
			mu.Lock()
			kills = append(kills, k)
			mu.Unlock()
			cl.sawKill(p.name)
			continue
		}
		mu.Lock()
		draining[p] = true
		mu.Unlock()
		drains.Go(func() {
			select {
			case <-exited:
				k.drain = time.Since(sent)
			case <-time.After(clusterTermDeadline):
				// Not drained: SIGQUIT makes Go print every goroutine's stack into
				// the process's log, which says where the shutdown hangs.
				k.forced, k.drain = true, time.Since(sent)
				var from int64
				if st, err := os.Stat(p.logPath); err == nil {
					from = st.Size()
				}
				p.signal(syscall.SIGQUIT)
				select {
				case <-exited:
				case <-time.After(5 * time.Second):
					p.signal(syscall.SIGKILL)
					<-exited
				}
				t.Logf("%s did not exit within %s of SIGTERM; its goroutines in paysvc code and kgo's group management:\n%s",
					p.name, clusterTermDeadline, paysvcStacks(p.logPath, from))
			}
			mu.Lock()
			kills = append(kills, k)
			delete(draining, p)
			mu.Unlock()
			cl.sawKill(p.name)
		})
	}
}

// kafkaNodes is the test's private Apache Kafka cluster: ops/kafka/kafka.sh's
// KRaft nodes (broker and controller in one JVM each, node ids 1..nodes) in a
// directory of the test's own, on ports of its own.
type kafkaNodes struct {
	t         *testing.T
	script    string
	env       []string // kafka.sh's environment
	nodes     int
	bootstrap string
	adm       *kadm.Client
}

// newKafkaNodes prepares the cluster and registers its destruction at the end of
// the test (after the processes', which are registered later): the nodes
// SIGKILLed, their directory deleted; on a failure the tail of each node's log
// is printed first. Without Java or Maven it fails: ops/kafka/kafka.sh needs both
// (make test installs them), and a test that quietly ran on kfake instead would
// prove less than it says.
func newKafkaNodes(t *testing.T, used map[int]bool) *kafkaNodes {
	t.Helper()
	var missing []string
	for _, tool := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("TestClusterUnderKills runs a private 3-node Apache Kafka cluster with ops/kafka/kafka.sh, which needs java (17+) and mvn; "+
			"not found: %s. Install them (make test and make test-cluster do; Debian: apt-get install openjdk-17-jre-headless maven), "+
			"or set %s=kfake to run it on one `paysvc broker` (kfake) instead", strings.Join(missing, ", "), clusterKafkaEnv)
	}
	script, err := filepath.Abs("../../../ops/kafka/kafka.sh")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("kafka: %v", err)
	}
	k := &kafkaNodes{t: t, script: script, nodes: clusterKafkaNodes}
	// The ports are chosen here, below the ephemeral range, rather than by
	// kafka.sh (PAYSVC_KAFKA_PORT_BASE=0 takes them from it): a killed node is
	// started again on the same ports, which must stay free while it is down (see
	// freePort).
	base := freeKafkaBase(t, used)
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "PAYSVC_DATA_DIR", "PAYSVC_KAFKA_PORT_BASE", "PAYSVC_KAFKA_NODES", "PAYSVC_KAFKA_BROKERS":
			continue
		}
		k.env = append(k.env, kv)
	}
	k.env = append(k.env, "PAYSVC_DATA_DIR="+t.TempDir(), fmt.Sprintf("PAYSVC_KAFKA_PORT_BASE=%d", base),
		fmt.Sprintf("PAYSVC_KAFKA_NODES=%d", k.nodes))
	t.Cleanup(func() {
		if t.Failed() {
			for n := 1; n <= k.nodes; n++ {
				out, err := k.run("log", strconv.Itoa(n), "40")
				t.Logf("--- kafka node %d: tail of its server.log (%v) ---\n%s", n, err, out)
			}
		}
		for n := 1; n <= k.nodes; n++ {
			if _, err := k.run("kill", strconv.Itoa(n)); err != nil {
				t.Errorf("kafka: %v", err)
			}
		}
		if _, err := k.run("destroy"); err != nil {
			t.Errorf("kafka: %v", err)
		}
	})
	return k
}

// freeKafkaBase picks a port base for kafka.sh: BASE..BASE+2 (brokers) and
// BASE+100..BASE+102 (controllers), all free and below the ephemeral range.
func freeKafkaBase(t *testing.T, used map[int]bool) int {
	t.Helper()
next:
	for range 1000 {
		base := 20000 + rand.IntN(11800)
		var ports []int
		for i := range clusterKafkaNodes {
			ports = append(ports, base+i, base+100+i)
		}
		for _, p := range ports {
			if used[p] {
				continue next
			}
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				continue next
			}
			l.Close()
		}
		for _, p := range ports {
			used[p] = true
		}
		return base
	}
	t.Fatal("no free ports for the Kafka nodes in 20000-31999")
	return 0
}

// run runs kafka.sh with args and returns its stdout; an error carries the tail
// of its stderr.
func (k *kafkaNodes) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{k.script}, args...)...)
	cmd.Env = k.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 4000 {
			msg = "..." + msg[len(msg)-4000:]
		}
		return stdout.String(), fmt.Errorf("kafka.sh %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	return stdout.String(), nil
}

// start starts every node and the test's admin client.
func (k *kafkaNodes) start(t *testing.T) {
	t.Helper()
	out, err := k.run("start")
	if err != nil {
		t.Fatal(err)
	}
	k.bootstrap = strings.TrimSpace(out)
	if k.bootstrap == "" {
		t.Fatal("kafka.sh start printed no bootstrap servers")
	}
	kcl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(k.bootstrap, ",")...), kgo.DialTimeout(time.Second),
		kgo.RequestTimeoutOverhead(2*time.Second), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kcl.Close) // before the nodes are destroyed
	k.adm = kadm.NewClient(kcl)
}

// signal stops node n: SIGKILL ("kafka.sh kill") or SIGTERM, a controlled
// shutdown ("kafka.sh term", which waits for the exit). It returns when the node
// is gone.
func (k *kafkaNodes) signal(n int, sig string) error {
	cmd := "kill"
	if sig == "SIGTERM" {
		cmd = "term"
	}
	_, err := k.run(cmd, strconv.Itoa(n))
	return err
}

// notWhole says what keeps the cluster from being whole, "" when every node is a
// registered broker and every partition of every topic has its leader and all its
// replicas in sync.
func (k *kafkaNodes) notWhole(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	md, err := k.adm.Metadata(ctx)
	if err != nil {
		return "metadata: " + err.Error()
	}
	if len(md.Brokers) != k.nodes {
		return fmt.Sprintf("brokers %v registered, want %d", md.Brokers.NodeIDs(), k.nodes)
	}
	var short []string
	for _, td := range md.Topics.Sorted() {
		if td.Err != nil {
			return fmt.Sprintf("topic %s: %v", td.Topic, td.Err)
		}
		for _, p := range td.Partitions.Sorted() {
			if p.Err != nil || p.Leader < 0 || len(p.ISR) < len(p.Replicas) {
				short = append(short, fmt.Sprintf("%s/%d (leader %d, isr %v of %v, %v)", p.Topic, p.Partition, p.Leader, p.ISR, p.Replicas, p.Err))
			}
		}
	}
	if len(short) > 0 {
		if len(short) > 3 {
			short = append(short[:3], fmt.Sprintf("and %d more", len(short)-3))
		}
		return "partitions short of their replicas: " + strings.Join(short, ", ")
	}
	return ""
}

// commandLeader is the node leading the command partition a merchant's commands
// go to: the partition franz-go's key partitioner (the producers' default, Kafka's
// murmur2) picks for the merchant's key.
func (k *kafkaNodes) commandLeader(ctx context.Context, merchant string) (node int, partition int32, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	md, err := k.adm.Metadata(ctx, clusterCommandsTopic)
	if err != nil {
		return 0, 0, err
	}
	td, ok := md.Topics[clusterCommandsTopic]
	if !ok || td.Err != nil || len(td.Partitions) == 0 {
		return 0, 0, fmt.Errorf("no topic %s in the metadata (%v)", clusterCommandsTopic, td.Err)
	}
	partition = int32(kgo.StickyKeyPartitioner(nil).ForTopic(clusterCommandsTopic).
		Partition(&kgo.Record{Key: topics.CommandKey(merchant)}, len(td.Partitions)))
	p, ok := td.Partitions[partition]
	if !ok || p.Leader < 0 {
		return 0, partition, fmt.Errorf("%s/%d has no leader", clusterCommandsTopic, partition)
	}
	return int(p.Leader), partition, nil
}

// coordinator is the node coordinating the consumer group, with the group's
// state and member count as the coordinator describes them.
func (k *kafkaNodes) coordinator(ctx context.Context, group string) (node int, state string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, ok := k.adm.FindGroupCoordinators(ctx, group)[group]
	if !ok {
		return 0, "", fmt.Errorf("no coordinator answer for %s", group)
	}
	if r.Err != nil {
		return 0, "", fmt.Errorf("find coordinator of %s: %w", group, r.Err)
	}
	if gs, err := k.adm.DescribeGroups(ctx, group); err == nil {
		if g, ok := gs[group]; ok && g.Err == nil {
			state = fmt.Sprintf("%s, %d members", g.State, len(g.Members))
		}
	}
	return int(r.NodeID), state, nil
}

// brokerFault is one fault of the Kafka nodes and how long the cluster took to
// have them back.
type brokerFault struct {
	kind   string // "broker" (a node not hit otherwise), "leader", "coordinator", "minority"
	signal string
	nodes  []int
	detail string        // which partition or group, and who led it afterwards
	stop   time.Duration // signal to gone (SIGTERM: the controlled shutdown)
	down   time.Duration // gone to started again (the start included)
	back   time.Duration // started again to every partition with its whole ISR
	failed string        // what went wrong, "" when nothing
}

// breakBrokers runs the broker faults, one at a time, each after the cluster has
// the previous one's nodes back: the leader of merchant 0's command partition
// with SIGKILL, the engines' group coordinator with SIGTERM, once every node but
// one at the same time (SIGKILL, for clusterMinorityDown, counting the writes
// answered meanwhile), merchant 1's leader with SIGTERM and the coordinator with
// SIGKILL; then each node that none of them hit. It stops early (between two
// faults) when ctx ends.
func (cl *cluster) breakBrokers(t *testing.T, ctx context.Context, seed uint64, ms []*clusterMerchant) []brokerFault {
	k := cl.kafka
	rng := rand.New(rand.NewPCG(seed, 29))
	hit := map[int]bool{}
	var faults []brokerFault
	plan := []struct {
		kind, signal string
		merchant     int
	}{
		{"leader", "SIGKILL", 0}, {"coordinator", "SIGTERM", 0}, {"minority", "SIGKILL", 0},
		{"leader", "SIGTERM", 1}, {"coordinator", "SIGKILL", 0},
	}
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return faults
		case <-time.After(clusterBrokerGap): // the broker faults' pace: the fault injector, not a wait
		}
		f := brokerFault{}
		switch {
		case i < len(plan):
			f.kind, f.signal = plan[i].kind, plan[i].signal
		default:
			var left []int
			for n := 1; n <= k.nodes; n++ {
				if !hit[n] {
					left = append(left, n)
				}
			}
			if len(left) == 0 {
				return faults
			}
			f.kind, f.signal, f.nodes = "broker", []string{"SIGKILL", "SIGTERM"}[rng.IntN(2)], left[:1]
		}
		switch f.kind {
		case "leader":
			m := ms[plan[i].merchant]
			node, part, err := k.commandLeader(ctx, m.id)
			if err != nil {
				t.Errorf("kafka: leader of merchant %d's command partition: %v", plan[i].merchant, err)
				continue
			}
			f.nodes, f.detail = []int{node}, fmt.Sprintf("%s/%d (merchant %d)", clusterCommandsTopic, part, plan[i].merchant)
		case "coordinator":
			node, state, err := k.coordinator(ctx, clusterEngineGroup)
			if err != nil {
				t.Errorf("kafka: %v", err)
				continue
			}
			f.nodes, f.detail = []int{node}, fmt.Sprintf("group %s (%s)", clusterEngineGroup, state)
		case "minority":
			// Every node but one, the survivor one already hit when there is one,
			// so that the fault also reaches the nodes the others have not.
			var survivor int
			for n := 1; n <= k.nodes; n++ {
				if hit[n] && (survivor == 0 || rng.IntN(2) == 0) {
					survivor = n
				}
			}
			if survivor == 0 {
				survivor = 1 + rng.IntN(k.nodes)
			}
			for n := 1; n <= k.nodes; n++ {
				if n != survivor {
					f.nodes = append(f.nodes, n)
				}
			}
			f.detail = fmt.Sprintf("node %d alone", survivor)
		}
		t.Logf("kafka: %s %s of node(s) %v: %s", f.kind, f.signal, f.nodes, f.detail)
		cl.brokerFault(t, &f, ms)
		for _, n := range f.nodes {
			hit[n] = true
		}
		switch f.kind {
		case "leader":
			if node, part, err := k.commandLeader(context.Background(), ms[plan[i].merchant].id); err == nil {
				f.detail += fmt.Sprintf("; then led by node %d (partition %d)", node, part)
			}
		case "coordinator":
			if node, state, err := k.coordinator(context.Background(), clusterEngineGroup); err == nil {
				f.detail += fmt.Sprintf("; then coordinated by node %d (%s)", node, state)
			}
		}
		t.Logf("kafka: %s of node(s) %v: stopped in %s, down %s, back in every ISR %s after the restart %s",
			f.kind, f.nodes, f.stop.Round(time.Millisecond), f.down.Round(time.Millisecond), f.back.Round(time.Millisecond), f.failed)
		faults = append(faults, f)
		if f.failed != "" {
			t.Errorf("kafka: %s of node(s) %v: %s", f.kind, f.nodes, f.failed)
			return faults // the cluster is not whole: later faults would prove nothing
		}
	}
}

// brokerFault stops f's nodes (all at once), starts them again after a short
// delay (a minority: after clusterMinorityDown, with the writes answered
// meanwhile counted) and waits until the cluster has them back.
func (cl *cluster) brokerFault(t *testing.T, f *brokerFault, ms []*clusterMerchant) {
	k := cl.kafka
	sent := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(f.nodes))
	for i, n := range f.nodes {
		wg.Go(func() { errs[i] = k.signal(n, f.signal) })
	}
	wg.Wait()
	gone := time.Now()
	f.stop = gone.Sub(sent)
	if err := errors.Join(errs...); err != nil {
		f.failed = err.Error()
	}
	if f.kind == "minority" {
		cl.window.open(gone)
		cl.probeWindow(t, ms)
		time.Sleep(clusterMinorityDown) // how long the minority is down: the fault's length is what is tested
		cl.window.close()
	} else {
		time.Sleep(clusterBrokerDown) // how long the nodes are down: the fault's length is what is tested
	}
	// kafka.sh start starts every node that is not running, at once (start-node
	// would start them one after the other: it holds the cluster's lock).
	var err error
	for attempt := range 3 {
		if len(f.nodes) > 1 {
			_, err = k.run("start")
		} else {
			_, err = k.run("start-node", strconv.Itoa(f.nodes[0]))
		}
		if err == nil {
			break
		}
		t.Logf("kafka: restart %d of node(s) %v: %v", attempt+1, f.nodes, err)
	}
	restarted := time.Now()
	f.down = restarted.Sub(gone)
	if err != nil {
		f.failed += fmt.Sprintf("; not started again: %v", err)
		return
	}
	why := ""
	_ = waittest.Wait(time.Until(restarted.Add(clusterBrokerBack)), func() (bool, string) { // Wait: a fault not healed is recorded, not fatal
		why = k.notWhole(context.Background())
		return why == "", why
	})
	f.back = time.Since(restarted)
	if why != "" {
		f.failed += fmt.Sprintf("; not back within %s: %s", clusterBrokerBack, why)
	}
}

// probeWindow sends fresh writes while all Kafka nodes but one are down, so that
// the window sees first attempts and not only the retries of the load's clients
// (which, stuck behind a key a killed API process still holds, mostly get 409):
// clusterWindowProbes transfers per merchant from its third working wallet, which
// the load's clients only pay into, one a second from the window's start. Each is
// an ordinary careful transfer of the model and the history, resolved after the
// window; they are concurrent, so their narratives ("cl p<j> <seq>") are outside
// the per-wallet order check.
func (cl *cluster) probeWindow(t *testing.T, ms []*clusterMerchant) {
	seq := cl.probeSeq.Add(1)
	for mi, m := range ms {
		for j := range clusterWindowProbes {
			hc := 3*len(ms) + mi*clusterWindowProbes + j
			cl.probes.Go(func() {
				time.Sleep(time.Duration(j) * time.Second) // one probe a second: the probes' pace, not a wait
				m.transfer(t, context.Background(), m.wallets[2], m.wallets[j%2], money.FromUnits(200+int64(j)),
					fmt.Sprintf("cl p%d %d", j, seq), hc)
			})
		}
	}
}

// checkBrokerFaults asserts that every kind of broker fault happened and that
// every node was hit at least once.
func checkBrokerFaults(t *testing.T, k *kafkaNodes, faults []brokerFault) {
	t.Helper()
	kinds := map[string]bool{}
	hit := map[int]bool{}
	for _, f := range faults {
		kinds[f.kind+" "+f.signal] = true
		if f.kind == "minority" {
			kinds["minority"] = true
		}
		for _, n := range f.nodes {
			hit[n] = true
		}
	}
	for _, want := range []string{"leader SIGKILL", "leader SIGTERM", "coordinator SIGKILL", "coordinator SIGTERM", "minority"} {
		if !kinds[want] {
			t.Errorf("kafka: no %s fault in %s (%d faults): the test proved less than it says", want, clusterFaultHardMax, len(faults))
		}
	}
	for n := 1; n <= k.nodes; n++ {
		if !hit[n] {
			t.Errorf("kafka: node %d was never stopped", n)
		}
	}
}

// minorityWindow watches the writes answered while every Kafka node but one is
// down: none may be acknowledged unless its key was first sent before (a command
// that was produced then and applied, answered from the stored reply); each
// should be a 503 or 504 (or no answer: a transport error or the client's
// timeout), never a 500.
type minorityWindow struct {
	mu      sync.Mutex
	isOpen  bool
	from    time.Time
	answers map[string]int
	bad     []string
	each    []string
}

func (w *minorityWindow) open(at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.isOpen, w.from = true, at
	if w.answers == nil {
		w.answers = map[string]int{}
	}
}

func (w *minorityWindow) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.isOpen = false
}

// observe is one write's attempt, sent at sent, of a key first sent at first;
// status 0 is no answer. Only attempts both sent and answered inside the window
// count.
func (w *minorityWindow) observe(first, sent time.Time, what string, status int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.isOpen || sent.Before(w.from) {
		return
	}
	label := strconv.Itoa(status)
	switch {
	case status == 0:
		label = "no answer"
	case status >= 200 && status < 300 && first.Before(w.from):
		label = "2xx replayed (key first sent before the window)"
	case status >= 200 && status < 300:
		w.bad = append(w.bad, fmt.Sprintf("%s acknowledged %d while all Kafka nodes but one were down (first sent %s after they were)",
			what, status, first.Sub(w.from).Round(time.Millisecond)))
	case status >= 500 && status != http.StatusServiceUnavailable && status != http.StatusGatewayTimeout:
		w.bad = append(w.bad, fmt.Sprintf("%s answered %d while all Kafka nodes but one were down", what, status))
	}
	w.answers[label]++
	if status == http.StatusConflict {
		return // a retry while another attempt of the key holds it: many, and all alike
	}
	w.each = append(w.each, fmt.Sprintf("+%s..+%s %s: %s", sent.Sub(w.from).Round(time.Millisecond),
		time.Since(w.from).Round(time.Millisecond), label, what))
}

type windowFigures struct {
	answers map[string]int
	bad     []string
	each    []string
}

func (w *minorityWindow) snapshot() windowFigures {
	w.mu.Lock()
	defer w.mu.Unlock()
	return windowFigures{answers: maps.Clone(w.answers), bad: slices.Clone(w.bad), each: slices.Clone(w.each)}
}

// client is a careful API client: each write carries an Idempotency-Key and is sent
// again with it, to either API process, while its outcome is unknown (a transport
// error, a timeout, a 5xx, 409 in flight, 429), as a real client behind a load
// balancer would. A retried request counts as one.
type clusterClient struct {
	cl     *cluster
	secret string
	http   *http.Client
	next   atomic.Uint32
}

func (cl *cluster) client(secret string) *clusterClient {
	return &clusterClient{cl: cl, secret: secret, http: &http.Client{Timeout: 10 * time.Second}}
}

// errRefused is a definite 4xx: the command was not applied.
type errRefused struct {
	status int
	body   string
}

func (e errRefused) Error() string { return fmt.Sprintf("refused %d: %s", e.status, e.body) }

// do sends the request until a definite answer and returns a 2xx body; a 4xx is an
// errRefused; giving up (clusterCommandLimit) is any other error. Every attempt of
// a write is shown to the minority window.
func (c *clusterClient) do(ctx context.Context, method, path string, body any, idemKey string) (map[string]any, error) {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	first := time.Now()
	giveUp := first.Add(clusterCommandLimit)
	var last string
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			c.cl.retried.Add(1)
			// The load's careful client, not a test's wait: its retry rate is part
			// of the load the cluster bears during faults, so it keeps its own pace
			// rather than waittest's backoff.
			time.Sleep(100 * time.Millisecond)
		}
		if time.Now().After(giveUp) {
			return nil, fmt.Errorf("%s %s (key %s): no definite answer in %s; last: %s", method, path, idemKey, clusterCommandLimit, last)
		}
		base := c.cl.apis[int(c.next.Add(1))%len(c.cl.apis)]
		req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), method, base+path, bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+c.secret)
		req.Header.Set("Content-Type", "application/json")
		if idemKey != "" {
			req.Header.Set("Idempotency-Key", idemKey)
		}
		sent := time.Now()
		resp, err := c.http.Do(req)
		what := fmt.Sprintf("%s %s (key %s, attempt %d, %s)", method, path, idemKey, attempt+1, base)
		if err != nil {
			if method != "GET" {
				c.cl.window.observe(first, sent, what, 0)
			}
			last = err.Error()
			c.cl.sawUnknown("transport")
			continue
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if method != "GET" {
			c.cl.window.observe(first, sent, what, resp.StatusCode)
		}
		switch s := resp.StatusCode; {
		case s >= 200 && s < 300:
			var m map[string]any
			if err := json.Unmarshal(out, &m); err != nil {
				return nil, fmt.Errorf("%s %s: %d undecodable: %s", method, path, s, out)
			}
			return m, nil
		case s >= 500 || s == http.StatusConflict || s == http.StatusTooManyRequests:
			last = fmt.Sprintf("%d %.200s", s, out)
			c.cl.sawUnknown(strconv.Itoa(s))
		default:
			return nil, errRefused{s, string(out)}
		}
	}
}

// balance reads a wallet's balance once, through the API process base: its
// current_balance in cents.
func (c *clusterClient) balance(base, wallet string) (int64, error) {
	req, err := http.NewRequest("GET", base+"/api/v1/wallets/"+wallet+"/", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.secret)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%d %.200s", resp.StatusCode, out)
	}
	var w struct {
		Balance string `json:"current_balance"`
	}
	if err := json.Unmarshal(out, &w); err != nil {
		return 0, fmt.Errorf("undecodable wallet: %v: %.200s", err, out)
	}
	a, err := money.Parse(w.Balance)
	if err != nil {
		return 0, err
	}
	return a.Cents()
}

// clusterMerchant is one merchant's load and what it was acknowledged.
type clusterMerchant struct {
	id         string
	c          *clusterClient
	settlement string
	wallets    []string
	hist       *history.Recorder

	readsOK, readsUnknown atomic.Int64

	mu        sync.Mutex
	model     map[string]money.Amount // working wallets' expected balances
	transfers []string                // acknowledged transfers' narratives, unique
	invoices  []string                // acknowledged STK pushes' invoice ids
	files     []string                // acknowledged payment files' tracking ids
}

// transfers moves money from the client's own wallet to the merchant's others, one
// transfer at a time, so their order is the order of the origin wallet's events.
// Each narrative names the transfer ("cl <wallet index> <n>").
func (m *clusterMerchant) runTransfers(t *testing.T, ctx context.Context, k, hc int) {
	src := m.wallets[k]
	for n := 0; ctx.Err() == nil; n++ {
		dst := m.wallets[(k+1+n%2)%len(m.wallets)]
		if !m.transfer(t, ctx, src, dst, money.FromUnits(100+int64(n%17)), fmt.Sprintf("cl %d %d", k, n), hc) {
			return
		}
		time.Sleep(clusterTransferPace) // the load's pace, not a wait
	}
}

// transfer makes one transfer as a careful client and records it in the model and
// the history (client hc): begun before its first attempt, ended by its definite
// answer or by the client giving up. It says whether it was acknowledged; anything
// else is an error of the test.
func (m *clusterMerchant) transfer(t *testing.T, ctx context.Context, src, dst string, amount money.Amount, narrative string, hc int) bool {
	op := m.hist.Begin(hc, history.Transfer{From: src, To: dst, Cents: mustCents(t, amount)})
	_, err := m.c.do(ctx, "POST", "/api/v1/wallets/"+src+"/intra_transfer/",
		map[string]any{"wallet_id": dst, "amount": amount.String(), "narrative": narrative}, m.id+"-"+narrative)
	var ref errRefused
	switch {
	case err == nil:
		op.Ok()
		m.mu.Lock()
		m.model[src] = m.model[src].Sub(amount)
		m.model[dst] = m.model[dst].Add(amount)
		m.transfers = append(m.transfers, narrative)
		m.mu.Unlock()
		return true
	case errors.As(err, &ref):
		op.Refused()
		t.Errorf("transfer %s refused: %v", narrative, err) // the wallets hold plenty: a refusal is a bug
	default:
		op.Unknown()
		t.Error(err)
	}
	return false
}

// runReads reads a random working wallet's balance every 100-200 ms through
// either API process, once each (no retry), as history client hc: the balance, or
// unknown when the read failed.
func (m *clusterMerchant) runReads(ctx context.Context, hc int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 31))
	for n := 0; ctx.Err() == nil; n++ {
		w := m.wallets[rng.IntN(len(m.wallets))]
		base := m.c.cl.apis[n%len(m.c.cl.apis)]
		op := m.hist.Begin(hc, history.Read{Wallet: w})
		if cents, err := m.c.balance(base, w); err != nil {
			op.Unknown()
			m.readsUnknown.Add(1)
		} else {
			op.Balance(cents)
			m.readsOK.Add(1)
		}
		time.Sleep(clusterReadPace + time.Duration(rng.Int64N(int64(clusterReadPace)))) // the load's pace, not a wait
	}
}

// collections pushes STK prompts to phones the sandbox simulator pays.
func (m *clusterMerchant) runCollections(t *testing.T, ctx context.Context) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for n := 0; ctx.Err() == nil; n++ {
		phone := fmt.Sprintf("2547%04d%04d", rng.IntN(10000), 1000+rng.IntN(9000)) // never a magic suffix 0001-0006
		r, err := m.c.do(ctx, "POST", "/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": phone, "amount": "10",
			"api_ref": fmt.Sprintf("cl-stk-%d", n)}, fmt.Sprintf("%s-stk-%d", m.id, n))
		if err != nil {
			t.Errorf("stk push %d: %v", n, err)
			return
		}
		inv, _ := r["invoice"].(map[string]any)
		id, _ := inv["invoice_id"].(string)
		if id == "" {
			t.Errorf("stk push %d: no invoice id in %v", n, r)
			return
		}
		m.mu.Lock()
		m.invoices = append(m.invoices, id)
		m.mu.Unlock()
		time.Sleep(clusterSTKPace) // the load's pace, not a wait
	}
}

// files initiates a payment file of B2C payouts (no approval) every clusterFileEvery.
func (m *clusterMerchant) runFiles(t *testing.T, ctx context.Context) {
	for n := 0; ctx.Err() == nil; n++ {
		ref := fmt.Sprintf("cl-file-%d", n)
		var txns []map[string]any
		for i := range clusterFileSize {
			txns = append(txns, map[string]any{"account": fmt.Sprintf("25471%03d%03d5", n, i), "amount": "50",
				"name": "Cluster worker", "narrative": "Payroll"})
		}
		r, err := m.c.do(ctx, "POST", "/api/v1/send-money/initiate", map[string]any{"currency": "KES", "provider": "MPESA-B2C",
			"requires_approval": "NO", "batch_reference": ref, "transactions": txns}, m.id+"-"+ref)
		if err != nil {
			t.Errorf("payment file %s: %v", ref, err)
			return
		}
		tid, _ := r["tracking_id"].(string)
		if tid == "" {
			t.Errorf("payment file %s: no tracking id in %v", ref, r)
			return
		}
		m.mu.Lock()
		m.files = append(m.files, tid)
		m.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(clusterFileEvery): // the load's pace, not a wait
		}
	}
}

// hookRecorder is the merchants' webhook receiver: it records every delivery in
// the order it arrived and always answers 200.
type hookRecorder struct {
	mu         sync.Mutex
	deliveries []hookDelivery
}

type hookDelivery struct {
	merchant  string // the receiver path's index
	id, topic string
	data      map[string]any
	at        time.Time // the handler's start
	signedAt  string    // webhook-timestamp: when the dispatcher signed the attempt (Unix seconds)
	remote    string    // the dispatcher's connection
}

func newHookRecorder() *hookRecorder { return &hookRecorder{} }

func (h *hookRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	b, _ := io.ReadAll(r.Body)
	var body struct {
		Topic string         `json:"topic"`
		Data  map[string]any `json:"data"`
	}
	_ = json.Unmarshal(b, &body)
	h.mu.Lock()
	h.deliveries = append(h.deliveries, hookDelivery{merchant: strings.TrimPrefix(r.URL.Path, "/hook/"),
		id: r.Header.Get("webhook-id"), topic: body.Topic, data: body.Data, at: at, signedAt: r.Header.Get("webhook-timestamp"),
		remote: r.RemoteAddr})
	h.mu.Unlock()
}

func (h *hookRecorder) snapshot() []hookDelivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.deliveries)
}

// notSettled says what is still outstanding after the faults, "" when nothing.
func (cl *cluster) notSettled(ctx context.Context, schema storagetest.Schema, ms []*clusterMerchant, rec *hookRecorder) string {
	if nr := cl.notReady(); len(nr) > 0 {
		return fmt.Sprintf("not ready: %v", nr)
	}
	var open int
	if err := schema.DB.GetContext(ctx, &open, `SELECT (SELECT count(*) FROM invoices WHERE state NOT IN ('COMPLETE', 'FAILED'))
		+ (SELECT count(*) FROM payout_files WHERE status <> 'COMPLETE') + (SELECT count(*) FROM outbox)
		+ (SELECT count(*) FROM webhook_deliveries WHERE status <> 'DELIVERED')`); err != nil {
		return err.Error()
	}
	if open > 0 {
		return fmt.Sprintf("%d invoices, files, outbox rows or deliveries not final", open)
	}
	// Every acknowledged transfer's event is delivered.
	seen := map[string]bool{}
	for _, d := range rec.snapshot() {
		if d.topic == "wallet_transfer_event" {
			seen[fmt.Sprint(d.merchant, "|", d.data["narrative"])] = true
		}
	}
	for i, m := range ms {
		m.mu.Lock()
		acked := slices.Clone(m.transfers)
		m.mu.Unlock()
		for _, n := range acked {
			if !seen[fmt.Sprint(i, "|", n)] {
				return fmt.Sprintf("transfer %q of merchant %d not delivered yet", n, i)
			}
		}
	}
	return ""
}

// clusterFigures is what the test reports (docs/operations.md keeps a run's).
type clusterFigures struct {
	kills                         []clusterKill
	faults                        []brokerFault
	window                        windowFigures
	transfers, stk, files, setups int
	applied                       int
	events, deliveries            int
	retried                       int64
	unknown                       map[string]int
	starts                        map[string]int // exits the test did not cause
	hist                          history.Report
	readsOK, readsUnknown         int
	settle, total                 time.Duration
}

func (f clusterFigures) report(t *testing.T) {
	byRole := map[string]int{}
	var drains []time.Duration
	forced, terms := 0, 0
	for _, k := range f.kills {
		role, _, _ := strings.Cut(k.proc, "-")
		byRole[role+" "+k.signal]++
		if k.signal == "SIGTERM" {
			terms++
			drains = append(drains, k.drain)
			if k.forced {
				forced++
			}
		}
	}
	keys := slices.Sorted(maps.Keys(byRole))
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, byRole[k]))
	}
	slices.Sort(drains)
	drain := "none"
	if len(drains) > 0 {
		drain = fmt.Sprintf("min %s median %s max %s", drains[0].Round(time.Millisecond),
			drains[len(drains)/2].Round(time.Millisecond), drains[len(drains)-1].Round(time.Millisecond))
	}
	var drainList []string
	for _, k := range f.kills {
		if k.signal == "SIGTERM" {
			drainList = append(drainList, fmt.Sprintf("%s %s", k.proc, k.drain.Round(time.Millisecond)))
		}
	}
	t.Logf("cluster figures: %d process kills (%d SIGKILL, %d SIGTERM): %s", len(f.kills), len(f.kills)-terms, terms, strings.Join(parts, ", "))
	t.Logf("cluster figures: SIGTERM drain (signal to exit) %s; not drained within %s: %d; each: %s", drain, clusterTermDeadline, forced,
		strings.Join(drainList, ", "))
	t.Logf("cluster figures: process exits the test did not cause (restarted by the supervisor): %v", f.starts)
	if len(f.faults) > 0 {
		kinds := map[string]int{}
		stops := map[string]int{} // node stops by signal, the minority's two included
		var each []string
		for _, b := range f.faults {
			kinds[b.kind+" "+b.signal]++
			stops[b.signal] += len(b.nodes)
			each = append(each, fmt.Sprintf("%s %s %v (%s): stop %s, down %s, back %s", b.kind, b.signal, b.nodes, b.detail,
				b.stop.Round(time.Millisecond), b.down.Round(time.Millisecond), b.back.Round(time.Millisecond)))
		}
		var ks []string
		for _, k := range slices.Sorted(maps.Keys(kinds)) {
			ks = append(ks, fmt.Sprintf("%s %d", k, kinds[k]))
		}
		t.Logf("cluster figures: %d broker faults: %s; node stops by signal: %v", len(f.faults), strings.Join(ks, ", "), stops)
		for _, e := range each {
			t.Logf("cluster figures: broker fault %s", e)
		}
		t.Logf("cluster figures: writes answered while all Kafka nodes but one were down (%s): %v", clusterMinorityDown, f.window.answers)
		t.Logf("cluster figures: each write answered in the window but the 409s (sent..answered, after the nodes were down):\n%s",
			strings.Join(f.window.each, "\n"))
	}
	t.Logf("cluster figures: commands acknowledged %d (transfers %d, STK pushes %d, payment files %d, setup %d), applied exactly once %d (setup writes counted as applied: the rest of the test uses them); requests retried %d (unknown outcomes by kind: %v)",
		f.transfers+f.stk+f.files+f.setups, f.transfers, f.stk, f.files, f.setups, f.applied, f.retried, f.unknown)
	t.Logf("cluster figures: history %d operations (%d reads answered, %d reads unknown), %d partitions, %d unknown, checked in %s",
		f.hist.Operations, f.readsOK, f.readsUnknown, f.hist.Partitions, f.hist.Unknown, f.hist.Took.Round(time.Millisecond))
	t.Logf("cluster figures: events %d, deliveries received %d (%d repeated); settled %s after the faults; whole test %s",
		f.events, f.deliveries, f.deliveries-f.events, f.settle.Round(time.Millisecond), f.total.Round(time.Second))
}

// verifyCluster checks exactly once, at least once in order, the money and the
// ledger, and returns the figures.
func verifyCluster(t *testing.T, ctx context.Context, cl *cluster, schema storagetest.Schema, ms []*clusterMerchant,
	rec *hookRecorder, kills []clusterKill) clusterFigures {
	f := clusterFigures{kills: kills}
	db := schema.DB
	deliveries := rec.snapshot()
	for i, m := range ms {
		mi := strconv.Itoa(i)
		f.transfers += len(m.transfers)
		f.stk += len(m.invoices)
		f.files += len(m.files)
		f.setups += 2 + 2*len(m.wallets) // webhook, deposit; each wallet and its deposit

		// Transfers: each acknowledged one applied once (one command, its two
		// entries), none applied that was not acknowledged, balances as the model.
		var rows []struct {
			Narrative string `db:"narrative"`
			Commands  int    `db:"commands"`
			Entries   int    `db:"entries"`
		}
		if err := db.SelectContext(ctx, &rows, `SELECT narrative, count(DISTINCT command_id) AS commands, count(*) AS entries
			FROM ledger_entries WHERE merchant_id = $1 AND trans_type = 'TRANSFER' AND narrative LIKE 'cl %' GROUP BY narrative`, m.id); err != nil {
			t.Fatal(err)
		}
		inLedger := map[string]int{}
		for _, r := range rows {
			if r.Commands != 1 || r.Entries != 2 {
				t.Errorf("merchant %d transfer %q: %d commands, %d entries in the ledger, want 1 and 2", i, r.Narrative, r.Commands, r.Entries)
			}
			inLedger[r.Narrative] = r.Commands
		}
		for _, n := range m.transfers {
			switch inLedger[n] {
			case 0:
				t.Errorf("merchant %d: acknowledged transfer %q is not in the ledger", i, n)
			case 1:
				f.applied++ // more than one was reported above
			}
			delete(inLedger, n)
		}
		for n := range inLedger {
			t.Errorf("merchant %d: transfer %q is in the ledger but was never acknowledged", i, n)
		}
		for _, w := range m.wallets {
			r, err := m.c.do(ctx, "GET", "/api/v1/wallets/"+w+"/", nil, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := r["current_balance"]; got != m.model[w].String() {
				t.Errorf("wallet %s holds %v, acknowledged transfers say %s", w, got, m.model[w])
			}
		}

		// Collections: each acknowledged push is one invoice, COMPLETE; none other.
		var invs []struct {
			ID    string `db:"invoice_id"`
			State string `db:"state"`
		}
		if err := db.SelectContext(ctx, &invs, `SELECT invoice_id, state FROM invoices WHERE merchant_id = $1`, m.id); err != nil {
			t.Fatal(err)
		}
		states := map[string]string{}
		for _, v := range invs {
			states[v.ID] = v.State
		}
		for _, id := range m.invoices {
			if states[id] != "COMPLETE" {
				t.Errorf("merchant %d: acknowledged invoice %s is %q, want COMPLETE", i, id, states[id])
			} else {
				f.applied++
			}
		}
		if len(invs) != len(m.invoices) {
			t.Errorf("merchant %d: %d invoices for %d acknowledged pushes", i, len(invs), len(m.invoices))
		}

		// Payment files: each acknowledged file once, COMPLETE, every payout paid.
		var files []struct {
			Tracking string `db:"tracking_id"`
			Status   string `db:"status"`
			Paid     int    `db:"paid"`
		}
		if err := db.SelectContext(ctx, &files, `SELECT tracking_id::text, status,
			(SELECT count(*) FROM payout_transactions p WHERE p.file_id = f.file_id AND p.status = 'COMPLETE') AS paid
			FROM payout_files f WHERE merchant_id = $1`, m.id); err != nil {
			t.Fatal(err)
		}
		byTracking := map[string]int{}
		for _, fl := range files {
			if fl.Status != "COMPLETE" || fl.Paid != clusterFileSize {
				t.Errorf("merchant %d: file %s is %s with %d of %d paid", i, fl.Tracking, fl.Status, fl.Paid, clusterFileSize)
			}
			byTracking[fl.Tracking]++
		}
		for _, tid := range m.files {
			if byTracking[tid] != 1 {
				t.Errorf("merchant %d: acknowledged file %s stored %d times", i, tid, byTracking[tid])
			} else {
				f.applied++
			}
		}
		if len(files) != len(m.files) {
			t.Errorf("merchant %d: %d files for %d acknowledged", i, len(files), len(m.files))
		}

		// Webhooks: at least once, in order per aggregate. Transfers from one wallet
		// were made one after another, so their events' order is their numbering;
		// an invoice's and a file's events move forward through their states.
		var mine []hookDelivery
		for _, d := range deliveries {
			if d.merchant == mi {
				mine = append(mine, d)
			}
		}
		checkHookOrder(t, i, mine, m, func(bad func(hookDelivery) bool) string { return explainDeliveries(ctx, db, mine, bad) })
	}
	f.applied += f.setups // setup writes were checked by their use (webhooks, balances)

	// Every event the dispatchers recorded was delivered and received.
	ids := map[string]int{}
	for _, d := range deliveries {
		ids[d.id]++
	}
	var recorded []string
	if err := db.SelectContext(ctx, &recorded, `SELECT event_id FROM webhook_deliveries WHERE merchant_id = ANY($1)`,
		pq.StringArray{ms[0].id, ms[1].id}); err != nil {
		t.Fatal(err)
	}
	for _, id := range recorded {
		if ids[id] == 0 {
			t.Errorf("event %s recorded but never received", id)
		}
	}
	f.events, f.deliveries = len(ids), len(deliveries)
	if len(recorded) != len(ids) {
		t.Errorf("%d events recorded for delivery, %d received", len(recorded), len(ids))
	}

	rep, err := storage.CheckLedger(ctx, db)
	if err != nil || !rep.OK {
		t.Errorf("ledger check: %+v %v", rep, err)
	}
	cmd := exec.Command(cl.bin, "ledger", "check")
	cmd.Env = append(os.Environ(), "PAYSVC_DATABASE_URL="+schema.URL)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("paysvc ledger check: %v\n%s", err, out)
	}
	if nr := cl.notReady(); len(nr) > 0 {
		t.Errorf("not ready at the end: %v", nr)
	}
	if f.transfers == 0 || f.stk == 0 || f.files == 0 {
		t.Errorf("the load did not run: %d transfers, %d pushes, %d files", f.transfers, f.stk, f.files)
	}
	// Every process (on kfake the broker included; the Kafka nodes are checked by
	// checkBrokerFaults) must have died at least once, or the test proved less
	// than it says.
	killed := map[string]bool{}
	for _, k := range kills {
		killed[k.proc] = true
	}
	for _, p := range cl.procs {
		if !killed[p.name] {
			t.Errorf("%s was never killed (%d kills)", p.name, len(kills))
		}
	}
	return f
}

// stateRank orders an aggregate's states; an event of a lower rank after a higher
// one was delivered out of order.
var stateRank = map[string]int{"PENDING": 0, "PREVIEW_AND_APPROVE": 0, "PROCESSING": 1, "COMPLETE": 2, "FAILED": 2, "CANCELLED": 2}

// explainDeliveries describes, for an order failure, the deliveries received that
// match: in the order they arrived, each with when, its event, whether it was a
// repeat, when the dispatcher signed it and over which connection; then every
// attempt the dispatchers recorded for those events.
func explainDeliveries(ctx context.Context, db *sqlx.DB, ds []hookDelivery, match func(hookDelivery) bool) string {
	var b strings.Builder
	seen := map[string]bool{}
	var events []string
	for i, d := range ds {
		repeat := seen[d.id]
		seen[d.id] = true
		if !match(d) {
			continue
		}
		if !repeat {
			events = append(events, d.id)
		}
		state, _ := d.data["state"].(string)
		if state == "" {
			state, _ = d.data["status"].(string)
		}
		narrative, _ := d.data["narrative"].(string)
		fmt.Fprintf(&b, "\n  received #%d at %s: %s event %s %s%s repeat=%v signed at %s from %s", i, d.at.UTC().Format("15:04:05.000"),
			d.topic, d.id, state, narrative, repeat, d.signedAt, d.remote)
	}
	var attempts []struct {
		Event   string    `db:"event_id"`
		At      time.Time `db:"at"`
		Status  *int      `db:"http_status"`
		Latency int       `db:"latency_ms"`
		Error   string    `db:"error"`
	}
	if err := db.SelectContext(ctx, &attempts, `SELECT event_id, at, http_status, latency_ms, coalesce(error, '') AS error
		FROM webhook_attempts WHERE event_id = ANY($1) ORDER BY at`, pq.StringArray(events)); err != nil {
		fmt.Fprintf(&b, "\n  attempts: %v", err)
	}
	for _, a := range attempts {
		status := "none"
		if a.Status != nil {
			status = strconv.Itoa(*a.Status)
		}
		fmt.Fprintf(&b, "\n  attempt recorded at %s: event %s, status %s, %d ms %s", a.At.UTC().Format("15:04:05.000"), a.Event, status, a.Latency, a.Error)
	}
	return b.String()
}

func checkHookOrder(t *testing.T, mi int, ds []hookDelivery, m *clusterMerchant, explain func(match func(hookDelivery) bool) string) {
	t.Helper()
	lastSeq := map[string]int{}    // origin wallet -> highest transfer number delivered
	lastRank := map[string]int{}   // invoice or file -> highest state delivered
	finals := map[string]bool{}    // invoices and files whose final event was received
	transfers := map[string]bool{} // narratives received
	seenID := map[string]bool{}    // events already received (a repeat is allowed)
	// A dispatcher killed after its receiver's 200s but before it recorded them
	// leaves the queue's tail unrecorded, and the next holder sends that tail again,
	// in order (docs/api-decisions.md, "Webhook order"). So a repeat may follow a
	// later event's first delivery, but only as part of an in-order replay: replay
	// holds, per aggregate, the position of the last repeat of the replay going on
	// (reset by the aggregate's next first delivery). First deliveries are always
	// in order.
	replay := map[string]int{}
	replays := 0
	for _, d := range ds {
		repeat := seenID[d.id]
		seenID[d.id] = true
		switch d.topic {
		case "wallet_transfer_event":
			narrative, _ := d.data["narrative"].(string)
			transfers[narrative] = true
			var k, n int
			if _, err := fmt.Sscanf(narrative, "cl %d %d", &k, &n); err != nil {
				continue // a setup deposit, a probe of the minority window (concurrent: unordered) or other movement
			}
			origin, _ := d.data["origin_wallet_id"].(string)
			if !repeat {
				delete(replay, origin)
			} else if last, ok := lastSeq[origin]; ok && n < last {
				prev, replaying := replay[origin]
				replay[origin] = n
				if !replaying {
					replays++
				}
				if !replaying || n >= prev {
					continue // an in-order replay of what the holder before sent
				}
			}
			if last, ok := lastSeq[origin]; ok && n < last {
				what := "delivered"
				if repeat {
					what = "repeated out of order in a replay"
				}
				later := fmt.Sprintf("cl %d %d", k, last)
				t.Errorf("merchant %d: transfer %q %s after transfer %d of the same wallet:%s", mi, narrative, what, last,
					explain(func(x hookDelivery) bool { n, _ := x.data["narrative"].(string); return n == narrative || n == later }))
			}
			lastSeq[origin] = max(lastSeq[origin], n)
		case "collection_event", "send_money_event":
			key, _ := d.data["invoice_id"].(string)
			state, _ := d.data["state"].(string)
			if d.topic == "send_money_event" {
				key, _ = d.data["tracking_id"].(string)
				state, _ = d.data["status"].(string)
				state = strings.ReplaceAll(state, "-", "_")
			}
			r, known := stateRank[state]
			if !known {
				t.Errorf("merchant %d: %s of %s in unknown state %q", mi, d.topic, key, state)
				continue
			}
			if !repeat {
				delete(replay, key)
			} else if last, ok := lastRank[key]; ok && r < last {
				prev, replaying := replay[key]
				replay[key] = r
				if !replaying {
					replays++
				}
				if !replaying || r >= prev {
					continue // an in-order replay (states of one rank: a file's payouts)
				}
			}
			if last, ok := lastRank[key]; ok && r < last {
				what := "delivered"
				if repeat {
					what = "repeated out of order in a replay"
				}
				t.Errorf("merchant %d: %s of %s in state %s %s after a later state:%s", mi, d.topic, key, state, what,
					explain(func(x hookDelivery) bool { return x.data["invoice_id"] == key || x.data["tracking_id"] == key }))
			}
			lastRank[key] = max(lastRank[key], r)
			if r == 2 {
				finals[key] = true
			}
		}
	}
	if replays > 0 {
		t.Logf("merchant %d: %d replays of a queue's tail after a dispatcher died before recording it (in order)", mi, replays)
	}
	for _, n := range m.transfers {
		if !transfers[n] {
			t.Errorf("merchant %d: no wallet_transfer_event received for acknowledged transfer %q", mi, n)
		}
	}
	for _, id := range m.invoices {
		if !finals[id] {
			t.Errorf("merchant %d: no final collection_event received for invoice %s", mi, id)
		}
	}
	for _, id := range m.files {
		if !finals[id] {
			t.Errorf("merchant %d: no final send_money_event received for file %s", mi, id)
		}
	}
}

// paysvcStacks returns the goroutines of a SIGQUIT dump written to path after
// offset from that run through paysvc's own packages or kgo's consumer groups.
func paysvcStacks(path string, from int64) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < from {
		return fmt.Sprint("no dump: ", err)
	}
	var keep []string
	for _, g := range strings.Split(string(b[from:]), "\n\n") {
		if strings.HasPrefix(g, "goroutine ") && (strings.Contains(g, "paysvc/") || strings.Contains(g, "kgo/consumer_group.go")) {
			keep = append(keep, g)
		}
	}
	out := strings.Join(keep, "\n\n")
	if len(out) > 20000 {
		out = out[:20000] + "\n..."
	}
	return out
}

// dumpLogs prints the end of every process's log, for a failure.
func (cl *cluster) dumpLogs(t *testing.T) {
	for _, p := range cl.procs {
		b, _ := os.ReadFile(p.logPath)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		p.mu.Lock()
		starts := p.starts
		p.mu.Unlock()
		t.Logf("--- %s (started %d times) ---\n%s", p.name, starts, strings.Join(lines, "\n"))
	}
}
