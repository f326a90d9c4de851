package bench

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// transferReq is one transfer the bench asked for.
type transferReq struct {
	M        *merchant
	Src, Dst int // indices into runner.wallets
	Cents    int64
	IdemKey  string
}

// pick chooses the next transfer of a scenario; each worker has its own rng.
func (s *scenarioSetup) pick(rng *rand.Rand) (m *merchant, src, dst int) {
	if s.Hot >= 0 {
		return s.Merchants[0], s.Sources[rng.IntN(len(s.Sources))], s.Hot
	}
	m = s.Merchants[rng.IntN(len(s.Merchants))]
	a := rng.IntN(len(m.Wallets))
	b := rng.IntN(len(m.Wallets) - 1)
	if b >= a {
		b++ // two distinct wallets, uniformly
	}
	return m, m.Wallets[a], m.Wallets[b]
}

// transferBody is built by hand: encoding/json on the load generator's hot path
// would take CPU from the service it shares two cores with.
func transferBody(dst string, cents int64) []byte {
	b := make([]byte, 0, 96)
	b = append(b, `{"wallet_id":"`...)
	b = append(b, dst...)
	b = append(b, `","amount":"`...)
	b = append(b, centsString(cents)...)
	b = append(b, `","narrative":"bench"}`...)
	return b
}

// worker is one load goroutine's private tally, merged after the phase so the
// request path takes no lock.
type worker struct {
	lat      []time.Duration // successful measured requests
	sendLat  []time.Duration // open loop: measured from the actual send, not the schedule
	ok       int
	warmOK   int
	errs     statusCounts
	warmErrs statusCounts
	delta    []int64 // per wallet: cents received minus sent by 200 answers
	unknown  []transferReq
	// stk-collect: 200 answers by merchant id (warmup included: every pushed
	// invoice must complete), and pushes without a known outcome.
	stkPushed  map[string]int
	stkUnknown int
}

func (r *runner) newWorker() *worker {
	return &worker{errs: newStatusCounts(), warmErrs: newStatusCounts(), delta: make([]int64, len(r.wallets)),
		stkPushed: map[string]int{}}
}

// newCounter is a worker that only counts answers and times them (no wallets'
// deltas, no pushes): the baseline's and the memory phases'.
func newCounter() *worker { return &worker{errs: newStatusCounts(), warmErrs: newStatusCounts()} }

// crew is a phase's workers, each running on its own goroutine.
type crew struct {
	ws []*worker
	wg sync.WaitGroup
}

// startCrew starts n workers made by newW, each running body with its index, itself
// and its own random stream: seeded by the run and the phase, so a rerun with the
// same seed sends the same requests.
func (r *runner) startCrew(n int, newW func() *worker, body func(i int, w *worker, rng *rand.Rand)) *crew {
	c := &crew{ws: make([]*worker, n)}
	for i := range c.ws {
		w := newW()
		c.ws[i] = w
		c.wg.Go(func() {
			body(i, w, rand.New(rand.NewPCG(r.seed, uint64(i)+uint64(r.phaseN)<<32)))
		})
	}
	return c
}

// finish waits for the crew and closes the phase: the time measured since
// measureFrom, and the workers' figures merged into p.
func (r *runner) finish(c *crew, p *phaseResult, measureFrom time.Time) {
	c.wg.Wait()
	p.Elapsed = time.Since(measureFrom)
	r.phaseN++
	r.merge(p, c.ws)
}

// budget is how long a closed loop's workers send: requests before measureFrom
// are warmup; after it, either requests measured requests in all (requests > 0)
// or until stopAt.
type budget struct {
	measureFrom, stopAt time.Time
	requests            int
	left                atomic.Int64
}

func newBudget(measureFrom, stopAt time.Time, requests int) *budget {
	b := &budget{measureFrom: measureFrom, stopAt: stopAt, requests: requests}
	b.left.Store(int64(requests))
	return b
}

// next reports whether a request sent at t0 is measured, and whether it may be
// sent at all (false: the phase is over for this worker).
func (b *budget) next(t0 time.Time) (measured, ok bool) {
	measured = !t0.Before(b.measureFrom)
	if measured {
		if b.requests > 0 {
			if b.left.Add(-1) < 0 {
				return measured, false
			}
		} else if !t0.Before(b.stopAt) {
			return measured, false
		}
	}
	return measured, true
}

// do sends one transfer and books its outcome: a 200 moved the money, a 4xx did
// not, anything else (no answer, 5xx) is an unknown outcome the model must resolve.
func (r *runner) do(ctx context.Context, w *worker, t transferReq, measured bool, started time.Time, schedLat *time.Duration) {
	path := "/api/v1/wallets/" + r.wallets[t.Src].ID + "/intra_transfer/"
	status, body, err := r.post(ctx, t.M, path, transferBody(r.wallets[t.Dst].ID, t.Cents), t.IdemKey)
	lat := time.Since(started)
	if status == http.StatusOK && err == nil {
		r.okCount.Add(1)
		w.delta[t.Src] -= t.Cents
		w.delta[t.Dst] += t.Cents
		if !measured {
			w.warmOK++
			return
		}
		w.ok++
		if schedLat != nil {
			w.lat = append(w.lat, *schedLat+lat)
			w.sendLat = append(w.sendLat, lat)
		} else {
			w.lat = append(w.lat, lat)
		}
		return
	}
	if mayHaveIssued(status, body, err) {
		w.unknown = append(w.unknown, t)
	}
	w.failed(status, body, err, measured)
}

// failed counts a request that was not answered 200, by its status, or as
// "transport" with the error when no answer came.
func (w *worker) failed(status int, body []byte, err error, measured bool) {
	key, sample := "transport", ""
	if err != nil {
		sample = err.Error()
	} else {
		key, sample = strconv.Itoa(status), string(body)
	}
	if measured {
		w.errs.add(key, sample)
	} else {
		w.warmErrs.add(key, sample)
	}
}

// mayHaveIssued tells a failed request whose command may still have been issued:
// no answer at all, or a 5xx other than a refusal before issuing.
func mayHaveIssued(status int, body []byte, err error) bool {
	return err != nil || (status >= 500 && !refusedBeforeIssue(status, body))
}

// refusedBeforeIssue tells a 5xx that certainly moved nothing: the API answers 503
// "overloaded" when its in-flight bound is full, before producing the command.
func refusedBeforeIssue(status int, body []byte) bool {
	return status == http.StatusServiceUnavailable && bytes.Contains(body, []byte(`"code":"overloaded"`))
}

// phaseResult is one load phase's figures.
type phaseResult struct {
	Name        string
	Mode        string // closed or open
	Concurrency int
	Elapsed     time.Duration // measured part only
	OK          int
	Lat         latencySummary
	SendLat     latencySummary // open loop only
	Errors      statusCounts
	WarmOK      int
	WarmErrors  statusCounts
	Rate        float64 // open loop: the scheduled rate
	Partitions  int     // command partitions the scenario's merchants use
	Server      serverFigures
	Started     time.Time // the first request of the phase (warmup included)
	MeasureFrom time.Time // the end of the warmup
	// stk-collect: 200 answers by merchant id, warmup included, and pushes whose
	// outcome is unknown (no answer, 5xx): they may have opened an invoice.
	STKPushed  map[string]int
	STKUnknown int
}

func (p phaseResult) throughput() float64 {
	if p.Elapsed <= 0 {
		return 0
	}
	return float64(p.OK) / p.Elapsed.Seconds()
}

// merge folds the workers' tallies into the phase result and the run's model.
func (r *runner) merge(p *phaseResult, ws []*worker) {
	p.Errors, p.WarmErrors = newStatusCounts(), newStatusCounts()
	p.STKPushed = map[string]int{}
	var lat, sendLat []time.Duration
	for _, w := range ws {
		for id, n := range w.stkPushed {
			p.STKPushed[id] += n
		}
		p.STKUnknown += w.stkUnknown
		p.OK += w.ok
		p.WarmOK += w.warmOK
		p.Errors.merge(w.errs)
		p.WarmErrors.merge(w.warmErrs)
		lat = append(lat, w.lat...)
		sendLat = append(sendLat, w.sendLat...)
		for i, d := range w.delta {
			r.delta[i] += d
		}
		r.unknown = append(r.unknown, w.unknown...)
	}
	p.Lat = summarize(lat)
	p.SendLat = summarize(sendLat)
}

func (r *runner) idemKey(worker int, n int) string {
	if !r.o.IdempotencyKeys {
		return ""
	}
	return "bench-" + r.runID + "-" + strconv.Itoa(worker) + "-" + strconv.Itoa(n)
}

// closedLoop runs conc workers that each send a transfer, wait for its answer and
// send the next: the maximum rate the service sustains at that concurrency. The
// first warmup of it (connections, actors, caches) is not measured; then either
// dur passes or requests measured requests are sent.
func (r *runner) closedLoop(ctx context.Context, s *scenarioSetup, conc int, warmup, dur time.Duration, requests int) phaseResult {
	p := phaseResult{Name: s.Name, Mode: "closed", Concurrency: conc}
	start := time.Now()
	measureFrom := start.Add(warmup)
	p.Started, p.MeasureFrom = start, measureFrom
	b := newBudget(measureFrom, measureFrom.Add(dur), requests)
	defer r.progress(ctx, start)()
	c := r.startCrew(conc, r.newWorker, func(i int, w *worker, rng *rand.Rand) {
		for n := 0; ctx.Err() == nil; n++ {
			t0 := time.Now()
			measured, ok := b.next(t0)
			if !ok {
				return
			}
			if s.STK {
				m := s.Merchants[rng.IntN(len(s.Merchants))]
				r.doSTK(ctx, w, m, stkPhone(rng), r.idemKey(r.phaseN<<16+i, n), measured, t0)
				continue
			}
			m, src, dst := s.pick(rng)
			t := transferReq{M: m, Src: src, Dst: dst, Cents: 1 + rng.Int64N(100), IdemKey: r.idemKey(r.phaseN<<16+i, n)}
			r.do(ctx, w, t, measured, t0, nil)
		}
	})
	r.finish(c, &p, measureFrom)
	return p
}

// openLoop sends transfers at a fixed rate whatever the answers do (each request
// has its slot on a schedule) and measures latency from the scheduled time: if the
// service stalls, the requests that should have been sent meanwhile count the
// stall too. That is what a merchant's traffic, which does not wait for us, sees.
func (r *runner) openLoop(ctx context.Context, s *scenarioSetup, rate float64, warmup, dur time.Duration, pool int) phaseResult {
	p := phaseResult{Name: s.Name, Mode: "open", Concurrency: pool, Rate: rate}
	total := int((warmup + dur).Seconds() * rate)
	interval := time.Duration(float64(time.Second) / rate)
	type slot struct {
		at       time.Time
		measured bool
		n        int
	}
	// Buffered for the whole phase so the scheduler never waits for a worker: a
	// late worker shows up as latency, not as a lower rate.
	slots := make(chan slot, total)
	c := r.startCrew(pool, r.newWorker, func(_ int, w *worker, rng *rand.Rand) {
		for sl := range slots {
			if ctx.Err() != nil {
				continue
			}
			m, src, dst := s.pick(rng)
			t := transferReq{M: m, Src: src, Dst: dst, Cents: 1 + rng.Int64N(100), IdemKey: r.idemKey(r.phaseN<<16, sl.n)}
			sent := time.Now()
			wait := sent.Sub(sl.at)
			r.do(ctx, w, t, sl.measured, sent, &wait)
		}
	})
	start := time.Now()
	measureFrom := start.Add(warmup)
	defer r.progress(ctx, start)()
	for n := 0; n < total && ctx.Err() == nil; n++ {
		at := start.Add(time.Duration(n) * interval)
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		slots <- slot{at: at, measured: !at.Before(measureFrom), n: n}
	}
	close(slots)
	r.finish(c, &p, measureFrom)
	return p
}

// progress prints the successful transfers of each second while a phase runs
// (--progress): a rate that sinks during a run points at state that builds up,
// such as dead rows a query keeps walking until autovacuum. It returns the stop.
func (r *runner) progress(ctx context.Context, start time.Time) func() {
	if !r.o.Progress {
		return func() {}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		last := r.okCount.Load()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case now := <-t.C:
				n := r.okCount.Load()
				r.printf("  .. %5.1fs  %d/s\n", now.Sub(start).Seconds(), n-last)
				last = n
			}
		}
	}()
	return func() { close(done); <-stopped }
}
