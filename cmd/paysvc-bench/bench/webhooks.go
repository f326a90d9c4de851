package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"paysvc/actors/outbound/webhooks"
	"paysvc/cmd/paysvc/service"
)

// webhooks: signed webhook deliveries end to end. Each of the scenario's merchants
// has one webhook on wallet_transfer_event pointing at its own receiver in this
// process (its own loopback port, as merchants have their own hosts), which checks
// both signatures of every request and answers 200. Events come from real
// intra-wallet transfers through the API, so each delivery took the whole path:
// engine commit, outbox, relay, event topic, dispatcher, HTTP.
//
// The dispatcher runs as its own process (`paysvc serve` with the dispatcher role
// only, as docs/design.md's roles allow), so it can be measured alone in two phases:
//   - throughput: the transfers of a backlog are made while no dispatcher runs; once
//     the relay has published them all, the dispatcher starts and the receivers
//     count deliveries. deliveries/s is the rate between the 10% and the 90% mark of
//     the backlog (the start, with the group join, and the tail are left out).
//   - latency: with the dispatcher running, transfers at a fixed open-loop rate; for
//     each delivery, from the event's commit time (the transfer's created_at in the
//     delivered body: the engine's batch time, taken just before its commit) to the
//     receiver getting it.

// Targets from the issue for webhooks.
const (
	targetWebhookRate = 5000.0 // signed deliveries/s at steady state
	targetWebhookP99  = 100 * time.Millisecond
	// webhookStall ends a wait for deliveries when none arrived for this long.
	webhookStall = 30 * time.Second
)

// webhookChildEnv is what the service child needs for the scenario: loopback
// endpoints, and no dispatcher in it (the scenario starts its own), unless the
// caller chose the roles.
func webhookChildEnv(getenv func(string) string) map[string]string {
	env := map[string]string{"PAYSVC_WEBHOOK_ALLOW_PRIVATE": "true"}
	if strings.TrimSpace(getenv("PAYSVC_ROLES")) == "" {
		env["PAYSVC_ROLES"] = strings.Join(slices.DeleteFunc(slices.Clone(service.AllRoles),
			func(r string) bool { return r == service.RoleDispatcher }), ",")
	}
	return env
}

// hookReceiver is the merchants' endpoints: one HTTP server per merchant.
type hookReceiver struct {
	servers []*http.Server
	urls    []string
	mu      sync.Mutex
	first   map[string]struct{} // event ids seen
	recs    []hookArrival       // first arrivals, in arrival order
	dupes   int                 // arrivals of an event already seen (at least once delivery)
	bad     int                 // signatures or bodies that did not check out
	badWhy  string
	keys    map[string][]byte // challenge -> signing key of its webhook (set once created)
	notify  chan struct{}     // a first arrival happened
	conns   atomic.Int64      // connections the dispatcher opened to the receivers
}

type hookArrival struct {
	At        time.Time
	Committed time.Time
}

func newHookReceiver(secrets []string) (*hookReceiver, error) {
	h := &hookReceiver{first: map[string]struct{}{}, keys: map[string][]byte{}, notify: make(chan struct{}, 1)}
	for _, secret := range secrets {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			h.close()
			return nil, err
		}
		srv := &http.Server{Handler: h.handler(secret), ReadHeaderTimeout: 10 * time.Second,
			ConnState: func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					h.conns.Add(1)
				}
			}}
		go srv.Serve(ln) //nolint:errcheck // ends with Close
		h.servers = append(h.servers, srv)
		h.urls = append(h.urls, "http://"+ln.Addr().String()+"/hook")
	}
	return h, nil
}

func (h *hookReceiver) close() {
	for _, s := range h.servers {
		s.Close()
	}
}

func (h *hookReceiver) key(challenge string) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.keys[challenge]
}

func (h *hookReceiver) handler(secret string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		at := time.Now()
		body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		hdr := map[string]string{}
		for _, k := range []string{"X-SERVICE-Signature", "webhook-id", "webhook-timestamp", "webhook-signature"} {
			hdr[k] = req.Header.Get(k)
		}
		var b struct {
			Topic string `json:"topic"`
			Data  struct {
				CreatedAt time.Time `json:"created_at"`
			} `json:"data"`
			Challenge string `json:"challenge"`
		}
		why := ""
		switch {
		case err != nil:
			why = "body: " + err.Error()
		case !webhooks.VerifyDelivery(secret, h.key(secret), hdr, body, at, 5*time.Minute):
			why = "signature does not verify"
		case json.Unmarshal(body, &b) != nil || b.Topic != "wallet_transfer_event" || b.Challenge != "" || b.Data.CreatedAt.IsZero():
			why = "unexpected body: " + string(body[:min(len(body), 200)])
		}
		id := hdr["webhook-id"]
		h.mu.Lock()
		if why != "" {
			h.bad++
			h.badWhy = why
			h.mu.Unlock()
			w.WriteHeader(http.StatusBadRequest) // the dispatcher retries; the run reports it
			return
		}
		if _, seen := h.first[id]; seen {
			h.dupes++
		} else {
			h.first[id] = struct{}{}
			h.recs = append(h.recs, hookArrival{At: at, Committed: b.Data.CreatedAt})
		}
		h.mu.Unlock()
		select {
		case h.notify <- struct{}{}:
		default:
		}
		w.WriteHeader(http.StatusOK)
	})
}

func (h *hookReceiver) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.recs)
}

// since is the first arrivals from index i on.
func (h *hookReceiver) since(i int) []hookArrival {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.recs[i:])
}

// waitFor waits until n distinct events arrived, or none arrived for webhookStall.
// at is called once at each mark (a count) it is given, in order.
func (h *hookReceiver) waitFor(ctx context.Context, n int, marks []int, at func(int)) error {
	last, lastAt := h.count(), time.Now()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		c := h.count()
		for len(marks) > 0 && c >= marks[0] {
			at(marks[0])
			marks = marks[1:]
		}
		if c >= n {
			return nil
		}
		if c != last {
			last, lastAt = c, time.Now()
		} else if time.Since(lastAt) > webhookStall {
			return fmt.Errorf("%d of %d events delivered, none for %s", c, n, webhookStall)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// webhookResult is the scenario's figures.
type webhookResult struct {
	Backlog     int     // events in the throughput phase
	GenRate     float64 // transfers/s while making the backlog
	Steady      float64 // deliveries/s between the 10% and 90% marks
	Overall     float64 // deliveries/s from the dispatcher's start to the last delivery
	FirstAfter  time.Duration
	DrainTook   time.Duration
	CPU         cpuUse // dispatcher process as Server; between the marks
	MainCPU     float64
	LiveRate    float64
	Live        latencySummary
	LiveWindow  int
	Events      int // events (200 transfers) in all phases
	Delivered   int // distinct events the receivers got
	Dupes, Bad  int
	BadWhy      string
	Recorded    int // delivery records DELIVERED in the database
	DispatchLog string
}

func (w *webhookResult) ok() bool {
	return w != nil && w.Delivered == w.Events && w.Bad == 0 && w.Recorded == w.Events
}

// setupWebhooks makes the scenario's merchants and funded wallets, starts their
// receivers and creates each merchant's webhook through the API.
func (r *runner) setupWebhooks(ctx context.Context, name string) (*scenarioSetup, error) {
	s, err := r.setup(ctx, name, r.o.Merchants, r.o.Wallets, true)
	if err != nil {
		return nil, err
	}
	s.Webhooks = true
	secrets := make([]string, len(s.Merchants))
	for i := range secrets {
		secrets[i] = fmt.Sprintf("bench-hook-secret-%s-%d", r.runID, i)
	}
	if r.hooks, err = newHookReceiver(secrets); err != nil {
		return nil, err
	}
	for i, m := range s.Merchants {
		body, _ := json.Marshal(map[string]any{"endpoint": r.hooks.urls[i], "challenge": secrets[i], "wallet_transfer_event": true})
		out, err := r.postRetry(ctx, m, "/api/v1/webhooks/", body, http.StatusCreated)
		if err != nil {
			return nil, fmt.Errorf("create webhook: %w", err)
		}
		var created struct {
			SigningSecret string `json:"signing_secret"`
		}
		if err := json.Unmarshal(out, &created); err != nil {
			return nil, fmt.Errorf("create webhook: %w", err)
		}
		key, err := webhooks.ParseSecret(created.SigningSecret)
		if err != nil {
			return nil, fmt.Errorf("create webhook: %w", err)
		}
		r.hooks.mu.Lock()
		r.hooks.keys[secrets[i]] = key
		r.hooks.mu.Unlock()
	}
	return s, nil
}

// runWebhooks is both phases of the scenario.
func (r *runner) runWebhooks(ctx context.Context, s *scenarioSetup) (phaseResult, error) {
	res := &webhookResult{Backlog: r.o.WebhookBacklog}
	r.webhooks = res
	defer r.hooks.close()

	// Throughput: the backlog is made and published with no dispatcher running.
	r.printf("\n%s: a backlog of %d transfers (closed loop, concurrency %d) while no dispatcher runs\n",
		s.Name, res.Backlog, r.o.Concurrency)
	gen := r.closedLoop(ctx, s, r.o.Concurrency, 0, 0, res.Backlog)
	res.GenRate = gen.throughput()
	events := gen.OK + gen.WarmOK
	r.printf("  transfers/s    %.0f  (%d ok)\n  errors         %s\n", res.GenRate, events, gen.Errors)
	if err := r.waitOutboxEmpty(ctx); err != nil {
		return gen, err
	}
	dir := filepath.Join(r.childDir, "dispatcher")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return gen, err
	}
	env := map[string]string{"PAYSVC_ROLES": service.RoleDispatcher, "PAYSVC_WEBHOOK_ALLOW_PRIVATE": "true",
		"PAYSVC_SMTP_SINK_ADDR": "127.0.0.1:0"}
	if strings.TrimSpace(os.Getenv("PAYSVC_KAFKA_BROKERS")) == "" {
		env["PAYSVC_KAFKA_BROKERS"] = r.child.kafka
	}
	start := time.Now()
	cc := childConfig{Service: r.o.Service, DatabaseURL: r.dbURL, Dir: dir, Env: env}
	if r.o.ServerCPUProfile != "" {
		cc.CPUProfile = r.o.ServerCPUProfile + ".dispatcher"
	}
	disp, err := startChild(ctx, cc)
	if err != nil {
		return gen, fmt.Errorf("start the dispatcher: %w", err)
	}
	defer func() {
		if err := disp.stop(); err != nil {
			r.printf("dispatcher stop: %v\n", err)
		}
		if cc.CPUProfile != "" {
			r.printf("dispatcher CPU profile: %s\n", cc.CPUProfile)
		}
		if n := disp.logLines(); n > 0 {
			res.DispatchLog = fmt.Sprintf("dispatcher log (level warn): %d lines, last ones:\n%s", n, disp.logTail(10))
		}
	}()
	r.printf("\n%s: dispatcher (pid %d, roles dispatcher) started with %d events in Kafka; healthy after %s\n",
		s.Name, disp.pid(), events, time.Since(start).Round(time.Millisecond))
	lo, hi := max(events/10, 1), max(events*9/10, 1)
	snaps := map[int]snap{}
	mains := map[int]snap{}
	err = r.hooks.waitFor(ctx, events, []int{1, lo, hi}, func(mark int) {
		m, _ := scrapeMetrics(ctx, r.http, disp.base)
		snaps[mark] = snap{m: m, cpu: sampleCPU(m)}
		mains[mark] = r.snapshot(ctx)
	})
	arrived := r.hooks.since(0)
	if err != nil {
		r.printf("  %v\n", err)
	}
	if len(arrived) > 0 {
		res.FirstAfter = arrived[0].At.Sub(start)
		res.DrainTook = arrived[len(arrived)-1].At.Sub(start)
		if d := arrived[len(arrived)-1].At.Sub(arrived[0].At).Seconds(); d > 0 {
			res.Overall = float64(len(arrived)) / d
		}
	}
	if len(arrived) >= hi && hi > lo {
		if d := arrived[hi-1].At.Sub(arrived[lo-1].At).Seconds(); d > 0 {
			res.Steady = float64(hi-lo) / d
		}
		res.CPU = cpuBetween(snaps[lo].cpu, snaps[hi].cpu)
		res.MainCPU = cpuBetween(mains[lo].cpu, mains[hi].cpu).Server
	}
	r.printf("  deliveries/s   %.0f between the 10%% and 90%% marks; %.0f from the first to the last; %d connections to %d receivers\n",
		res.Steady, res.Overall, r.hooks.conns.Load(), len(r.hooks.urls))
	r.printf("  timeline       first delivery %s after the start, the last %s after\n",
		res.FirstAfter.Round(time.Millisecond), res.DrainTook.Round(time.Millisecond))
	if u := res.CPU; u.OK {
		r.printf("  cpu (cores)    dispatcher %.2f, postgres %.2f, bench (receivers) %.2f, service (api, engine, relay, kafka) %.2f, other %.2f; machine busy %.2f of %d\n",
			u.Server, u.Postgres, u.Bench, res.MainCPU, max(u.other(true)-res.MainCPU, 0), u.Busy, runtime.NumCPU())
		if res.Steady > 0 {
			r.printf("  cpu/delivery   dispatcher %.0f us, postgres %.0f us, receiver %.0f us\n",
				1e6*u.Server/res.Steady, 1e6*u.Postgres/res.Steady, 1e6*u.Bench/res.Steady)
		}
	}
	if err != nil {
		res.Events, res.Delivered = events, len(arrived)
		return gen, nil
	}

	// Latency: transfers at a fixed rate, delivered as they commit.
	total := r.webhookLatency(ctx, s, res, disp, events)
	res.Events = total
	r.hooks.mu.Lock()
	res.Delivered, res.Dupes, res.Bad, res.BadWhy = len(r.hooks.recs), r.hooks.dupes, r.hooks.bad, r.hooks.badWhy
	r.hooks.mu.Unlock()
	// The receivers answer before the dispatcher writes the outcome: give it time.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := r.db.GetContext(ctx, &res.Recorded, `SELECT count(*) FROM webhook_deliveries WHERE status = 'DELIVERED'`); err != nil {
			return gen, err
		}
		if res.Recorded >= res.Events || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return gen, nil
}

// webhookLatency runs transfers at a fixed rate with the dispatcher running and
// measures committed-to-delivered latency; it returns the events made in all.
func (r *runner) webhookLatency(ctx context.Context, s *scenarioSetup, res *webhookResult, disp *child, events int) int {
	res.LiveRate = r.o.WebhookRate
	if res.LiveRate <= 0 {
		res.LiveRate = max(res.GenRate/2, 1)
	}
	hw := min(time.Second, r.o.Warmup)
	from := r.hooks.count()
	measureFrom := time.Now().Add(hw)
	cpuAt := func() (snap, snap) {
		m, _ := scrapeMetrics(ctx, r.http, disp.base)
		return r.snapshot(ctx), snap{m: m, cpu: sampleCPU(m)}
	}
	type pair struct{ main, disp snap }
	first := make(chan pair, 1)
	go func() {
		time.Sleep(hw)
		a, b := cpuAt()
		first <- pair{a, b}
	}()
	live := r.openLoop(ctx, s, res.LiveRate, hw, r.o.Duration, r.openLoopWorkers())
	endMain, endDisp := cpuAt()
	startCPU := <-first
	total := events + live.OK + live.WarmOK
	if err := r.hooks.waitFor(ctx, total, nil, nil); err != nil {
		r.printf("  %v\n", err)
	}
	var lats []time.Duration
	for _, a := range r.hooks.since(from) {
		if !a.Committed.Before(measureFrom) {
			lats = append(lats, a.At.Sub(a.Committed))
		}
	}
	res.Live, res.LiveWindow = summarize(lats), len(lats)
	r.printf("\n%s live: open loop at %.0f transfers/s for %.1fs (after %s warmup), dispatcher running\n",
		s.Name, res.LiveRate, live.Elapsed.Seconds(), hw)
	r.printf("  transfers      %d ok; latency %s; errors %s\n", live.OK, live.Lat, live.Errors)
	r.printf("  committed->delivered  %s (%d deliveries of events committed in the measured window)\n", res.Live, res.LiveWindow)
	if u, m := cpuBetween(startCPU.disp.cpu, endDisp.cpu), cpuBetween(startCPU.main.cpu, endMain.cpu); u.OK && m.OK {
		r.printf("  cpu (cores)    service (api, engine, relay, kafka) %.2f, dispatcher %.2f, postgres %.2f, bench %.2f, other %.2f; machine busy %.2f of %d\n",
			m.Server, u.Server, u.Postgres, u.Bench, max(u.other(true)-m.Server, 0), u.Busy, runtime.NumCPU())
	}

	return total
}

// waitOutboxEmpty waits until the relay has published every committed event.
func (r *runner) waitOutboxEmpty(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var n int
		if err := r.db.GetContext(ctx, &n, `SELECT count(*) FROM outbox`); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the relay left %d outbox rows unpublished for 2 minutes", n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// printWebhookCheck reports that every event was delivered, signed, and recorded.
func (r *runner) printWebhookCheck(verdict func(bool) string) bool {
	w := r.webhooks
	if w == nil {
		return true
	}
	r.printf("  webhooks check %s: %d events (200 transfers), %d delivered to the receivers (%d repeated deliveries), %d DELIVERED records, %d bad signatures or bodies\n",
		verdict(w.ok()), w.Events, w.Delivered, w.Dupes, w.Recorded, w.Bad)
	if w.BadWhy != "" {
		r.printf("    e.g. %s\n", w.BadWhy)
	}
	if w.DispatchLog != "" {
		r.printf("  %s\n", w.DispatchLog)
	}
	return w.ok()
}

func (r *runner) printWebhookTargets(met func(bool) string) {
	w := r.webhooks
	if w == nil {
		return
	}
	r.printf("  %-40s %-10s %s\n", fmt.Sprintf("webhooks >= %.0f deliveries/s", targetWebhookRate),
		fmt.Sprintf("%.0f/s", w.Steady), met(w.Steady >= targetWebhookRate))
	if w.Live.N > 0 {
		r.printf("  %-40s %-10s %s (at %.0f events/s)\n", fmt.Sprintf("webhooks committed->delivered p99 <= %dms", targetWebhookP99.Milliseconds()),
			ms(w.Live.P99)+"ms", met(w.Live.P99 <= targetWebhookP99), w.LiveRate)
	}
}

var errWebhooksNeedChild = errors.New("--scenario webhooks starts its own dispatcher process: it needs the bench to start the service (no --url)")
