package waittest_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"paysvc/actors/values/waittest"
)

// failures is a testing.TB that records Fatal instead of ending the test, so the
// failing path of Eventually can be checked. Eventually calls nothing else of it.
type failures struct {
	testing.TB
	fatal []string
}

func (f *failures) Helper()           {}
func (f *failures) Fatal(args ...any) { f.fatal = append(f.fatal, fmt.Sprint(args...)) }

func TestEventually(t *testing.T) {
	t.Parallel()

	t.Run("ReturnsOnceTheConditionHolds", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int32
		f := &failures{}
		start := time.Now()
		waittest.Eventually(f, 5*time.Second, func() (bool, string) {
			n := calls.Add(1)
			return n == 4, fmt.Sprintf("call %d", n)
		})
		if len(f.fatal) != 0 || calls.Load() != 4 {
			t.Fatalf("fatal %q after %d calls, want none after 4", f.fatal, calls.Load())
		}
		// Three pauses of the backoff (1, 2 and 4 ms): far below the limit.
		if d := time.Since(start); d > time.Second {
			t.Fatalf("a condition true on the 4th look took %v", d)
		}
	})

	t.Run("ConditionTrueAtOnceIsNotWaitedFor", func(t *testing.T) {
		t.Parallel()
		f := &failures{}
		calls := 0
		waittest.Eventually(f, 0, func() (bool, string) { calls++; return true, "" })
		if len(f.fatal) != 0 || calls != 1 {
			t.Fatalf("fatal %q after %d calls, want none after 1", f.fatal, calls)
		}
	})

	t.Run("FailsWithTheLastWhyAndTheTimeWaited", func(t *testing.T) {
		t.Parallel()
		f := &failures{}
		calls := 0
		start := time.Now()
		waittest.Eventually(f, 60*time.Millisecond, func() (bool, string) {
			calls++
			return false, fmt.Sprintf("%d of 3 deliveries", calls)
		})
		waited := time.Since(start)
		if len(f.fatal) != 1 {
			t.Fatalf("%d fatal calls, want 1: %q", len(f.fatal), f.fatal)
		}
		msg := f.fatal[0]
		if want := fmt.Sprintf("%d of 3 deliveries", calls); !strings.HasSuffix(msg, want) || !strings.Contains(msg, "limit 60ms") {
			t.Fatalf("message %q: want the last why %q and the limit", msg, want)
		}
		if waited < 60*time.Millisecond || waited > 2*time.Second {
			t.Fatalf("gave up after %v, want just past the 60ms limit", waited)
		}
		if calls < 3 {
			t.Fatalf("%d looks in 60ms, want the backoff to look several times", calls)
		}
	})
}

func TestWait(t *testing.T) {
	t.Parallel()
	calls := 0
	if err := waittest.Wait(0, func() (bool, string) { calls++; return false, "never" }); err == nil ||
		!strings.HasSuffix(err.Error(), ": never") || calls != 1 {
		t.Fatalf("Wait with no time = %v after %d calls, want an error ending in the why after exactly one look", err, calls)
	}
	// A condition made true from another goroutine is seen.
	var mu sync.Mutex
	ready := false
	go func() {
		time.Sleep(5 * time.Millisecond) // the condition comes true later: the delay is what is tested
		mu.Lock()
		ready = true
		mu.Unlock()
	}()
	if err := waittest.Wait(5*time.Second, func() (bool, string) { mu.Lock(); defer mu.Unlock(); return ready, "not ready" }); err != nil {
		t.Fatal(err)
	}
}

func TestClock(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := waittest.NewClock(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now = %v, want the start %v", got, start)
	}
	if got := c.Advance(90 * time.Second); !got.Equal(start.Add(90*time.Second)) || !c.Now().Equal(got) {
		t.Fatalf("Advance = %v, Now = %v; want both %v", got, c.Now(), start.Add(90*time.Second))
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { c.Advance(time.Second); _ = c.Now() })
	}
	wg.Wait()
	if got := c.Now(); !got.Equal(start.Add(100 * time.Second)) {
		t.Fatalf("after ten concurrent seconds Now = %v, want %v", got, start.Add(100*time.Second))
	}
}
