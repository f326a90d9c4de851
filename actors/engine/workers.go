package engine

import "sync"

// workers run the partitions' shares of a round (startRound, applyRound) on
// goroutines that live as long as the poll loop. A goroutine started per
// partition per round began with a small stack and grew it on every round (the
// apply goes deep: hydration, the actors' asks, the handlers): the copies were
// ~1.5% of the service's CPU under transfer load, and the starts ~1%
// (docs/benchmarks-history.md). A worker keeps the stack it grew.
//
// Jobs never wait for one another or for the poll loop, so a job waiting for a
// free worker always gets one.
type workers struct {
	jobs chan func()
	once sync.Once
}

func newWorkers(n int) *workers {
	w := &workers{jobs: make(chan func())}
	for range n {
		go func() {
			for f := range w.jobs {
				f()
			}
		}()
	}
	return w
}

// run runs f on a worker (on a new goroutine if w is nil, as in tests that call a
// round's parts directly), counted in wg.
func (w *workers) run(wg *sync.WaitGroup, f func()) {
	if w == nil {
		wg.Go(f)
		return
	}
	wg.Add(1)
	w.jobs <- func() {
		defer wg.Done()
		f()
	}
}

// stop lets the workers end once their jobs are done.
func (w *workers) stop() {
	if w != nil {
		w.once.Do(func() { close(w.jobs) })
	}
}
