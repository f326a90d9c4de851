package service_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/values/money"
	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage"
	"paysvc/storage/storagetest"
	"paysvc/topics"
)

// A `paysvc serve` process under transfer load gets SIGTERM. It says it is not
// ready while it still serves (the drain delay), answers every request it took,
// finishes its engine's work, leaves its consumer groups and exits 0. Every
// transfer that got a 2xx is in the ledger exactly once. The drain time is
// logged (docs/operations.md records it), not asserted.
func TestGracefulShutdownUnderLoad(t *testing.T) {
	t.Parallel()
	bin := servicetest.BuildBinary(t)
	schema := storagetest.New(t)
	// The broker outlives the process, so the groups it left can be looked at.
	// The process has a namespace of its own (PAYSVC_KAFKA_NAMESPACE), as it
	// would on a shared cluster.
	ns := servicetest.Namespace(t, nil)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, ns.Topic(topics.CommandsTopic)),
		kfake.AllowAutoTopicCreation(), kfake.GroupMinSessionTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)

	const drainDelay = time.Second
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(),
		"PAYSVC_DATABASE_URL="+schema.URL,
		"PAYSVC_KAFKA_BROKERS="+strings.Join(cluster.ListenAddrs(), ","),
		"PAYSVC_KAFKA_NAMESPACE="+string(ns),
		"PAYSVC_HTTP_ADDR=127.0.0.1:0", "PAYSVC_ADMIN_ADDR=127.0.0.1:0", "PAYSVC_SMTP_SINK_ADDR=127.0.0.1:0",
		"PAYSVC_DATA_DIR="+t.TempDir(), "PAYSVC_COMMAND_PARTITIONS=4", "PAYSVC_RATE_LIMIT=0",
		// Long enough that a member which did not leave would still be listed
		// when the group is looked at after the exit.
		"PAYSVC_ENGINE_SESSION_TIMEOUT=10s",
		"PAYSVC_SHUTDOWN_DRAIN_DELAY="+drainDelay.String(),
		"PAYSVC_INSTANCE_ID=drain-1", "PAYSVC_LOG_FORMAT=json", "PAYSVC_LOG_LEVEL=info",
	)
	logs := &servicetest.LogBuffer{}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	serving := make(chan map[string]any, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			_, _ = logs.Write(append(line, '\n'))
			if os.Getenv("PAYSVC_TEST_LOG") != "" {
				fmt.Fprintln(os.Stderr, string(line))
			}
			var rec map[string]any
			if json.Unmarshal(line, &rec) == nil && rec["msg"] == "paysvc serving" {
				serving <- rec
			}
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("process log:\n%s", logs.String())
		}
	})
	var addr, adminAddr string
	select {
	case rec := <-serving:
		addr, adminAddr = rec["addr"].(string), rec["admin_addr"].(string)
	case err := <-exited:
		t.Fatalf("paysvc serve exited at start: %v\n%s", err, logs.String())
	case <-time.After(time.Minute):
		t.Fatalf("paysvc serve never served:\n%s", logs.String())
	}
	eventually(t, adminAddr, "the process at start", func(s int, _ readyDoc) bool { return s == 200 })

	cfg := servicetest.Config(t, schema)
	fb := &faultBundle{api: &servicetest.Env{T: t, Schema: schema, BaseURL: "http://" + addr, Config: cfg}}
	fb.provision(t, 3, 4)
	model := map[string]money.Amount{}
	secretOf := map[string]string{}
	for _, m := range fb.merchants {
		for w, a := range m.initial {
			model[w], secretOf[w] = a, m.secret
		}
	}

	// The load: workers send transfers until the port refuses them. A refused
	// connection was never received. A connection cut with no answer (EOF, reset)
	// is the race every HTTP/1.1 server has at its listener's close: a request
	// written on a kept-alive connection as Shutdown closes it as idle, or one
	// waiting in the kernel's accept queue when the listener closes. Such a request
	// was never read, so it must not have been applied: the balances below, which
	// count only acknowledged transfers, prove it. A 5xx is an answer the drain
	// failed to give.
	var (
		mu                       sync.Mutex
		sigterm                  atomic.Int64 // unix nanos, 0 before
		acked, ackedAfterTerm    atomic.Int64
		refusedDefinite, unknown atomic.Int64
		cutUnanswered            atomic.Int64
		unknownWhat              []string
		next                     atomic.Int64
	)
	client := &http.Client{Timeout: time.Minute}
	var wg sync.WaitGroup
	loadCtx, stopLoad := context.WithTimeout(context.Background(), 3*time.Minute)
	defer stopLoad()
	for w := 0; w < 16; w++ {
		wg.Go(func() {
			for loadCtx.Err() == nil {
				i := next.Add(1) - 1
				m := fb.merchants[int(i)%len(fb.merchants)]
				src := m.wallets[int(i/7)%len(m.wallets)]
				dst := m.wallets[int(i/7+1)%len(m.wallets)]
				amount := money.FromUnits(100 + i%50)
				body, _ := json.Marshal(map[string]any{"wallet_id": dst, "amount": amount.String(), "narrative": "drain load"})
				req, _ := http.NewRequestWithContext(loadCtx, "POST", "http://"+addr+"/api/v1/wallets/"+src+"/intra_transfer/", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+m.secret)
				req.Header.Set("Idempotency-Key", fmt.Sprintf("drain-%d", i))
				resp, err := client.Do(req)
				if err != nil {
					if errors.Is(err, syscall.ECONNREFUSED) {
						refusedDefinite.Add(1)
						return // the listener is closed: this instance is done
					}
					if sigterm.Load() == 0 {
						unknown.Add(1) // before the stop, nothing may cut a connection
						mu.Lock()
						unknownWhat = append(unknownWhat, fmt.Sprintf("transfer %d: %v", i, err))
						mu.Unlock()
					} else {
						cutUnanswered.Add(1) // never read: the balances check it was not applied
					}
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch {
				case resp.StatusCode == 200:
					mu.Lock()
					model[src] = model[src].Sub(amount)
					model[dst] = model[dst].Add(amount)
					mu.Unlock()
					acked.Add(1)
					if sigterm.Load() != 0 {
						ackedAfterTerm.Add(1)
					}
				case resp.StatusCode == 400: // refused (insufficient funds): no effect
				default:
					unknown.Add(1)
					mu.Lock()
					unknownWhat = append(unknownWhat, fmt.Sprintf("transfer %d: %d", i, resp.StatusCode))
					mu.Unlock()
				}
			}
		})
	}
	loadDeadline, _ := loadCtx.Deadline() // the load's own bound
	waittest.Eventually(t, time.Until(loadDeadline), func() (bool, string) {
		return acked.Load() >= 300, fmt.Sprintf("the load never reached 300 transfers (%d)", acked.Load())
	})

	// SIGTERM, and watch /readyz: it must say draining while the API still serves.
	start := time.Now()
	sigterm.Store(start.UnixNano())
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var sawDraining atomic.Bool
	go func() {
		// Off the test's goroutine, and the test judges sawDraining itself: Wait,
		// whose error only says the window passed.
		_ = waittest.Wait(drainDelay+5*time.Second-time.Since(start), func() (bool, string) {
			resp, err := http.Get("http://" + adminAddr + "/readyz")
			if err != nil {
				return true, "" // the operator listener closed
			}
			var d readyDoc
			_ = json.NewDecoder(resp.Body).Decode(&d)
			resp.Body.Close()
			if resp.StatusCode == 503 && d.Status == "draining" {
				sawDraining.Store(true)
			}
			return sawDraining.Load(), "/readyz never said draining"
		})
	}()
	var exitErr error
	select {
	case exitErr = <-exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("no exit 2 minutes after SIGTERM")
	}
	took := time.Since(start)
	wg.Wait()
	if exitErr != nil {
		t.Fatalf("exit after SIGTERM: %v", exitErr)
	}

	// The groups it was in have no member left: it left them, rather than
	// being expired a session timeout later.
	adm, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	groups, err := kadm.NewClient(adm).DescribeGroups(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) == 0 {
		t.Fatal("no consumer group on the broker: the test proved nothing")
	}
	for _, g := range groups.Sorted() {
		if !strings.HasPrefix(g.Group, string(ns)) {
			t.Errorf("group %s outside the process's namespace %s", g.Group, ns)
		}
		if len(g.Members) != 0 {
			t.Errorf("group %s still has %d members after the exit (state %s)", g.Group, len(g.Members), g.State)
		}
	}

	var drained map[string]any
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"msg":"drained"`) {
			_ = json.Unmarshal([]byte(line), &drained)
		}
	}
	t.Logf("SIGTERM to exit: %v (drain delay %v; the process's own account: %v); transfers acknowledged %d, of which answered after SIGTERM %d; refused by the closed port %d; cut unanswered at the close %d; groups left %d",
		took.Round(time.Millisecond), drainDelay, drained, acked.Load(), ackedAfterTerm.Load(), refusedDefinite.Load(),
		cutUnanswered.Load(), len(groups))
	if drained == nil {
		t.Error(`the process never logged "drained"`)
	}
	if !sawDraining.Load() {
		t.Error("/readyz never said draining between SIGTERM and the exit")
	}
	if ackedAfterTerm.Load() == 0 {
		t.Error("no request was answered after SIGTERM: the drain was not exercised")
	}
	if n := unknown.Load(); n > 0 {
		t.Errorf("%d requests got no definite answer during the drain: %v", n, unknownWhat)
	}

	// Every acknowledged transfer is applied, once, and nothing else is: a
	// transfer cut unanswered at the close left no trace.
	for w, want := range model {
		var got money.Amount
		if err := schema.DB.Get(&got, `SELECT current_balance FROM wallets WHERE wallet_id = $1`, w); err != nil {
			t.Fatal(err)
		}
		if !got.Equal(want) {
			t.Errorf("wallet %s holds %s, the acknowledged transfers say %s", w, got, want)
		}
	}
	rep, err := storage.CheckLedger(context.Background(), schema.DB)
	if err != nil || !rep.OK {
		t.Fatalf("ledger check: %+v %v", rep, err)
	}
	var dupes int
	if err := schema.DB.Get(&dupes, `SELECT count(*) FROM (SELECT command_id FROM ledger_entries
		GROUP BY command_id, account HAVING count(*) > 1) d`); err != nil || dupes != 0 {
		t.Fatalf("commands applied twice: %d (%v)", dupes, err)
	}
}
