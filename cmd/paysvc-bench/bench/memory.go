package bench

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lib/pq"

	"paysvc/cmd/paysvc/admin"
)

// The wallets-1m scenario: the service's memory with a million
// wallets of which few are active. The wallets are seeded straight into the bench
// database at zero balance (an API call each would take the whole run); only the
// active set is funded, through the API, so the ledger stays balanced and every
// transfer of the run is a real one. Idle actors must be passivated
// (PAYSVC_ENGINE_IDLE_AFTER) for memory to follow the active set.

const (
	// ScenarioMemory is the million-wallet memory scenario; only when named.
	ScenarioMemory = "wallets-1m"
	// memIdleAfter is the child's PAYSVC_ENGINE_IDLE_AFTER unless the caller set
	// one: short enough that the idle phase shows passivation within a minute.
	memIdleAfter = "30s"
	targetMemRSS = 512 << 20 // bytes: RSS with 1,000,000 wallets, 10,000 active
	memWalletIDs = "M%09d"   // seeded wallet ids: 10 characters, like ids.Alias(10); the seeding SQL writes the same
)

func memoryChildEnv(getenv func(string) string) map[string]string {
	if strings.TrimSpace(getenv("PAYSVC_ENGINE_IDLE_AFTER")) != "" {
		return nil
	}
	return map[string]string{"PAYSVC_ENGINE_IDLE_AFTER": memIdleAfter}
}

// memSetup is the seeded population: wallet g (1..Total) belongs to merchant
// (g-1) mod len(Merchants); wallets 1..Active are funded.
type memSetup struct {
	Merchants []*merchant
	Total     int
	Active    int
	Deposit   int64 // cents in each active wallet
	SeedTook  time.Duration
	FundTook  time.Duration
	RSSBefore int64 // the service's RSS before the seeding
}

func memWalletID(g int) string { return fmt.Sprintf(memWalletIDs, g) }

// pick returns a transfer of merchant m between two of its wallets: from an
// active (funded) one to another active one, or, with random, to any of its
// wallets across the whole population.
func (s *memSetup) pick(rng *rand.Rand, random bool) (m *merchant, src, dst string) {
	nm := len(s.Merchants)
	mi := rng.IntN(nm)
	m = s.Merchants[mi]
	activeEach := s.Active / nm // wallets mi+1, mi+1+nm, ... up to Active
	totalEach := s.Total / nm
	a := rng.IntN(activeEach)
	var b int
	if random {
		for b = rng.IntN(totalEach); b == a; b = rng.IntN(totalEach) {
		}
	} else {
		if b = rng.IntN(activeEach - 1); b >= a {
			b++
		}
	}
	return m, memWalletID(mi + 1 + a*nm), memWalletID(mi + 1 + b*nm)
}

// setupMemory seeds the wallets in one statement and funds the active ones.
func (r *runner) setupMemory(ctx context.Context, name string) (*scenarioSetup, error) {
	o := r.o
	ms := &memSetup{Total: o.MemoryWallets, Active: o.MemoryActive}
	ms.RSSBefore, _ = readRSS(r.child.pid())
	for i := 0; i < o.Merchants; i++ {
		c, err := admin.CreateMerchant(ctx, r.db, fmt.Sprintf("bench %s %d", name, i+1), "sandbox")
		if err != nil {
			return nil, fmt.Errorf("create merchant: %w", err)
		}
		ms.Merchants = append(ms.Merchants, &merchant{ID: c.MerchantID, Secret: c.SecretKey, Auth: "Bearer " + c.SecretKey})
	}
	ids := make([]string, len(ms.Merchants))
	for i, m := range ms.Merchants {
		ids[i] = m.ID
	}
	started := time.Now()
	// A version-1 WORKING wallet at zero, as wallet.create would leave it: no
	// ledger entry is needed for a zero snapshot.
	if _, err := r.db.ExecContext(ctx, `INSERT INTO wallets (wallet_id, merchant_id, currency, wallet_type, label, can_disburse,
			current_balance, available_balance, version, created_at, updated_at)
		SELECT 'M' || lpad(g::text, 9, '0'), ($2::text[])[1 + (g - 1) % cardinality($2::text[])], 'KES', 'WORKING',
			'bench mem ' || g, false, 0, 0, 1, now(), now()
		FROM generate_series(1, $1::int) g`, ms.Total, pq.StringArray(ids)); err != nil {
		return nil, fmt.Errorf("seed %d wallets: %w", ms.Total, err)
	}
	if _, err := r.db.ExecContext(ctx, `ANALYZE wallets`); err != nil {
		return nil, err
	}
	ms.SeedTook = time.Since(started)

	deposit, err := parseCents(o.Deposit)
	if err != nil {
		return nil, err
	}
	ms.Deposit = deposit
	started = time.Now()
	body := []byte(`{"amount":"` + o.Deposit + `","narrative":"bench funding"}`)
	errs := make(chan error, 1)
	next := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for g := range next {
				m := ms.Merchants[(g-1)%len(ms.Merchants)]
				if _, err := r.postRetry(ctx, m, "/api/v1/sandbox/wallets/"+memWalletID(g)+"/deposit/", body, 200); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
feed:
	for g := 1; g <= ms.Active; g++ {
		select {
		case next <- g:
		case err := <-errs:
			close(next)
			wg.Wait()
			return nil, err
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	ms.FundTook = time.Since(started)
	r.mem = ms
	return &scenarioSetup{Name: name, Hot: -1, Merchants: ms.Merchants, Memory: true}, nil
}

func (r *runner) printMemorySetup(s *scenarioSetup) {
	ms := r.mem
	r.printf("  %-16s %d merchants, %d wallets seeded at zero in %s (one INSERT ... generate_series), %d active funded through the API in %s; service RSS before seeding %s; %s\n",
		s.Name, len(ms.Merchants), ms.Total, ms.SeedTook.Round(time.Millisecond), ms.Active, ms.FundTook.Round(time.Millisecond),
		mib(ms.RSSBefore), r.idleAfter())
}

func (r *runner) idleAfter() string {
	v := strings.TrimSpace(r.childEnv["PAYSVC_ENGINE_IDLE_AFTER"])
	if v == "" {
		v = strings.TrimSpace(os.Getenv("PAYSVC_ENGINE_IDLE_AFTER"))
	}
	if v == "" {
		v = "2m (the service default)"
	}
	return "PAYSVC_ENGINE_IDLE_AFTER " + v
}

// readRSS is a process's resident set size in bytes (VmRSS of /proc/PID/status).
func readRSS(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// rssSampler reads the service's RSS every second until stopped.
type rssSampler struct {
	mu      sync.Mutex
	samples []rssSample
	stop    chan struct{}
	done    chan struct{}
}

type rssSample struct {
	At  time.Time
	RSS int64
}

func startRSSSampler(pid int) *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{})}
	take := func() {
		if v, err := readRSS(pid); err == nil {
			s.mu.Lock()
			s.samples = append(s.samples, rssSample{At: time.Now(), RSS: v})
			s.mu.Unlock()
		}
	}
	take()
	go func() {
		defer close(s.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				take()
				return
			case <-t.C:
				take()
			}
		}
	}()
	return s
}

func (s *rssSampler) close() { close(s.stop); <-s.done }

// mark takes a sample now (a phase boundary) and returns it.
func (s *rssSampler) mark(pid int) rssSample {
	v, _ := readRSS(pid)
	x := rssSample{At: time.Now(), RSS: v}
	s.mu.Lock()
	s.samples = append(s.samples, x)
	s.mu.Unlock()
	return x
}

// between is the start, peak and end RSS of the samples from a to b.
func (s *rssSampler) between(a, b time.Time) (start, peak, end int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first := true
	for _, x := range s.samples {
		if x.At.Before(a) || x.At.After(b) {
			continue
		}
		if first {
			start, first = x.RSS, false
		}
		peak = max(peak, x.RSS)
		end = x.RSS
	}
	return start, peak, end
}

// memPhase is one phase of the memory scenario with the service's memory around it.
type memPhase struct {
	Name             string
	Load             *phaseResult // nil for the idle phase
	From, To         time.Time
	Start, Peak, End int64
	Live             float64 // paysvc_engine_live_actors at the end
	HeapInuse        float64 // go_memstats_heap_inuse_bytes at the end
}

type memResult struct {
	Phases  []memPhase
	SumOK   bool
	SumNote string
}

// runMemory drives transfers among the active wallets, then to random ones across
// the population, then leaves the service idle for passivation, sampling its RSS
// every second throughout.
func (r *runner) runMemory(ctx context.Context, s *scenarioSetup) (phaseResult, error) {
	ms := r.mem
	pid := r.child.pid()
	sampler := startRSSSampler(pid)
	defer sampler.close()
	res := &memResult{}
	r.memRes = res
	gauge := func() (live, heap float64) {
		m, err := scrapeMetrics(ctx, r.http, r.admin)
		if err != nil {
			return -1, -1
		}
		return m.sum("paysvc_engine_live_actors"), m.sum("go_memstats_heap_inuse_bytes")
	}
	var active phaseResult
	for _, random := range []bool{false, true} {
		name := "active " + strconv.Itoa(ms.Active)
		if random {
			name = "random of " + strconv.Itoa(ms.Total)
		}
		from := sampler.mark(pid)
		p := r.observed(ctx, r.o.Warmup, transferRoute, func() phaseResult {
			return r.memLoop(ctx, ms, s.Name+" ("+name+")", random)
		})
		to := sampler.mark(pid)
		ph := memPhase{Name: name, Load: &p, From: from.At, To: to.At}
		ph.Start, ph.Peak, ph.End = sampler.between(from.At, to.At)
		ph.Live, ph.HeapInuse = gauge()
		res.Phases = append(res.Phases, ph)
		r.printPhase(p)
		r.printMemPhase(ph)
		if !random {
			active = p
		}
		if ctx.Err() != nil {
			return active, ctx.Err()
		}
	}
	if wait := r.o.MemoryIdleWait; wait > 0 {
		from := sampler.mark(pid)
		r.printf("\n%s idle: no load for %s (passivation after %s)\n", s.Name, wait, strings.TrimPrefix(r.idleAfter(), "PAYSVC_ENGINE_IDLE_AFTER "))
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return active, ctx.Err()
		}
		to := sampler.mark(pid)
		ph := memPhase{Name: "idle", From: from.At, To: to.At}
		ph.Start, ph.Peak, ph.End = sampler.between(from.At, to.At)
		ph.Live, ph.HeapInuse = gauge()
		res.Phases = append(res.Phases, ph)
		r.printMemPhase(ph)
	}
	// Money moved only among the seeded wallets: together they hold exactly what
	// was deposited, whatever the outcome of each transfer (the ledger check
	// follows with the others).
	var sum int64
	if err := r.db.GetContext(ctx, &sum, `SELECT coalesce(sum(current_balance) * 100, 0)::bigint FROM wallets
		WHERE merchant_id = ANY($1) AND wallet_type = 'WORKING'`, pq.StringArray(merchantIDs(ms.Merchants))); err != nil {
		return active, err
	}
	want := ms.Deposit * int64(ms.Active)
	res.SumOK = sum == want
	res.SumNote = fmt.Sprintf("%d seeded wallets hold %s, deposited %s", ms.Total, centsString(sum), centsString(want))
	return active, nil
}

func merchantIDs(ms []*merchant) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func (r *runner) printMemPhase(ph memPhase) {
	live := "unknown"
	if ph.Live >= 0 {
		live = strconv.FormatFloat(ph.Live, 'f', 0, 64)
	}
	heap := ""
	if ph.HeapInuse > 0 {
		heap = fmt.Sprintf(", Go heap in use %s", mib(int64(ph.HeapInuse)))
	}
	r.printf("  service RSS    start %s, peak %s, end %s (growth %+.0f MiB); live actors at the end %s%s\n",
		mib(ph.Start), mib(ph.Peak), mib(ph.End), float64(ph.End-ph.Start)/(1<<20), live, heap)
}

// memLoop is the closed loop of the memory phases: the same client, body and
// concurrency as the transfer scenarios, on the seeded wallets.
func (r *runner) memLoop(ctx context.Context, ms *memSetup, name string, random bool) phaseResult {
	o := r.o
	p := phaseResult{Name: name, Mode: "closed", Concurrency: o.Concurrency}
	start := time.Now()
	measureFrom := start.Add(o.Warmup)
	p.Started, p.MeasureFrom = start, measureFrom
	stopAt := measureFrom.Add(o.Duration)
	defer r.progress(ctx, start)()
	c := r.startCrew(o.Concurrency, newCounter, func(_ int, w *worker, rng *rand.Rand) {
		for ctx.Err() == nil {
			t0 := time.Now()
			if !t0.Before(stopAt) {
				return
			}
			measured := !t0.Before(measureFrom)
			m, src, dst := ms.pick(rng, random)
			status, body, err := r.post(ctx, m, "/api/v1/wallets/"+src+"/intra_transfer/", transferBody(dst, 1+rng.Int64N(100)), "")
			lat := time.Since(t0)
			switch {
			case err == nil && status == 200 && measured:
				r.okCount.Add(1)
				w.ok++
				w.lat = append(w.lat, lat)
			case err == nil && status == 200:
				r.okCount.Add(1)
				w.warmOK++
			default:
				w.failed(status, body, err, measured)
			}
		}
	})
	r.finish(c, &p, measureFrom)
	return p
}

func (r *runner) printMemoryTargets(met func(bool) string) {
	res := r.memRes
	if res == nil || len(res.Phases) == 0 {
		return
	}
	a := res.Phases[0]
	r.printf("  %-40s %-10s %s\n", fmt.Sprintf("RSS <= %s, %d wallets, %d active", mib(targetMemRSS), r.mem.Total, r.mem.Active),
		mib(a.Peak), met(a.Peak > 0 && a.Peak <= targetMemRSS))
	for _, ph := range res.Phases[1:] {
		r.printf("  %-40s %-10s (growth %+.0f MiB over the phase; live actors at its end %.0f)\n", "RSS peak, "+ph.Name, mib(ph.Peak),
			float64(ph.End-ph.Start)/(1<<20), ph.Live)
	}
}

func (r *runner) printMemoryCheck(verdict func(bool) string) bool {
	if r.memRes == nil {
		return true
	}
	r.printf("  memory wallets %s: %s\n", verdict(r.memRes.SumOK), r.memRes.SumNote)
	return r.memRes.SumOK
}
