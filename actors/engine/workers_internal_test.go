package engine

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Jobs run on the workers, at most as many at once as there are workers, and all
// of them, even when there are more jobs than workers; nil workers run each job
// on its own goroutine; stop may be called twice.
func TestWorkersRunEveryJobOnAtMostTheirNumber(t *testing.T) {
	w := newWorkers(3)
	defer w.stop()
	var wg sync.WaitGroup
	var now, most, done atomic.Int32
	for range 20 {
		w.run(&wg, func() {
			n := now.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(2 * time.Millisecond) // the work's duration: long enough to overlap, under test
			now.Add(-1)
			done.Add(1)
		})
	}
	wg.Wait()
	if done.Load() != 20 || most.Load() > 3 || most.Load() < 2 {
		t.Fatalf("%d of 20 jobs done, at most %d at once (3 workers)", done.Load(), most.Load())
	}
	w.stop()

	var none *workers
	ran := false
	none.run(&wg, func() { ran = true })
	wg.Wait()
	if !ran {
		t.Fatal("nil workers did not run the job")
	}
	none.stop()
}
