package every

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// start runs j in the background; the returned function cancels it and waits
// for Run to return, failing the test if it does not.
func start(t *testing.T, j Job) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, quiet, j) }()
	return func() {
		t.Helper()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v after its context ended; want nil", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return after its context ended")
		}
	}
}

// waitRuns waits until ch has delivered n values.
func waitRuns(t *testing.T, ch <-chan struct{}, n int) {
	t.Helper()
	for i := range n {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d of %d runs came", i, n)
		}
	}
}

// The metrics are the process's (one vector per metric), so these tests do not
// run in parallel and each uses a job name of its own.
func TestRun(t *testing.T) {
	t.Run("RunsOnItsInterval", func(t *testing.T) {
		ran := make(chan struct{}, 100)
		before := testutil.ToFloat64(runs.WithLabelValues(CardClearing))
		stop := start(t, Job{Name: CardClearing, Interval: time.Millisecond, Run: func(context.Context) error {
			ran <- struct{}{}
			return nil
		}})
		waitRuns(t, ran, 3)
		stop()
		if got := testutil.ToFloat64(runs.WithLabelValues(CardClearing)) - before; got < 3 {
			t.Errorf("paysvc_job_runs_total rose by %v; want at least 3", got)
		}
		if testutil.ToFloat64(lastSuccess.WithLabelValues(CardClearing)) == 0 {
			t.Error("paysvc_job_last_success_timestamp_seconds is 0 after successful runs")
		}
		if got := testutil.ToFloat64(interval.WithLabelValues(CardClearing)); got != 0.001 {
			t.Errorf("paysvc_job_interval_seconds = %v; want 0.001", got)
		}
	})

	t.Run("RunsNeverOverlap", func(t *testing.T) {
		var inside, overlaps atomic.Int32
		ran := make(chan struct{}, 100)
		release := make(chan struct{})
		stop := start(t, Job{Name: PayoutResubmit, Interval: time.Millisecond, Run: func(context.Context) error {
			if inside.Add(1) > 1 {
				overlaps.Add(1)
			}
			defer inside.Add(-1)
			ran <- struct{}{}
			<-release // held across many ticks
			return nil
		}})
		waitRuns(t, ran, 1)
		// The ticker fires many times while the run is held; had Run started
		// another, it would be inside now, so release the first and wait for
		// two more: each saw inside == 1 or counted an overlap.
		close(release)
		waitRuns(t, ran, 2)
		stop()
		if n := overlaps.Load(); n != 0 {
			t.Errorf("%d runs started while another was running", n)
		}
	})

	t.Run("ErrorsAreCounted", func(t *testing.T) {
		ran := make(chan struct{}, 100)
		before := testutil.ToFloat64(failures.WithLabelValues(STKQuery))
		var n atomic.Int32
		stop := start(t, Job{Name: STKQuery, Interval: time.Millisecond, Run: func(context.Context) error {
			defer func() { ran <- struct{}{} }()
			if n.Add(1) <= 2 {
				return errors.New("rail unreachable")
			}
			return nil
		}})
		waitRuns(t, ran, 4) // the 4th run's start means the 2nd run's error was recorded
		stop()
		if got := testutil.ToFloat64(failures.WithLabelValues(STKQuery)) - before; got != 2 {
			t.Errorf("paysvc_job_errors_total rose by %v; want 2", got)
		}
	})

	t.Run("StopsWhenContextEnds", func(t *testing.T) {
		entered := make(chan struct{})
		var after atomic.Bool
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- Run(ctx, quiet, Job{Name: STKResend, Interval: time.Millisecond, Run: func(ctx context.Context) error {
				if ctx.Err() != nil {
					after.Store(true)
				}
				select {
				case entered <- struct{}{}:
				default:
				}
				<-ctx.Done() // the run in flight sees the stop
				return ctx.Err()
			}})
		}()
		<-entered
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run = %v; want nil", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return after its context ended")
		}
		if after.Load() {
			t.Error("a run started after the context ended")
		}
		if got := testutil.ToFloat64(failures.WithLabelValues(STKResend)); got != 0 {
			t.Errorf("a run ended by the stop counted as an error (%v)", got)
		}
	})

	t.Run("AtStartRunsBeforeTheFirstInterval", func(t *testing.T) {
		ran := make(chan struct{}, 1)
		stop := start(t, Job{Name: OutboxBacklog, Interval: time.Hour, AtStart: true, Run: func(context.Context) error {
			ran <- struct{}{}
			return nil
		}})
		waitRuns(t, ran, 1)
		stop()
	})

	t.Run("NextSetsTheWait", func(t *testing.T) {
		ran := make(chan struct{}, 100)
		stop := start(t, Job{Name: SubscriptionCycles, Interval: time.Hour, AtStart: true,
			Next: func() time.Duration { return time.Millisecond },
			Run: func(context.Context) error {
				ran <- struct{}{}
				return nil
			}})
		waitRuns(t, ran, 3) // an hour's interval: only Next's wait brings runs 2 and 3
		stop()
	})

	t.Run("RefusesAnUnknownJob", func(t *testing.T) {
		for _, j := range []Job{
			{Name: "nobody.knows", Interval: time.Second, Run: func(context.Context) error { return nil }},
			{Name: LedgerAudit, Run: func(context.Context) error { return nil }},
			{Name: LedgerAudit, Interval: time.Second},
		} {
			if err := Run(context.Background(), quiet, j); !errors.Is(err, ErrJob) {
				t.Errorf("Run(%+v) = %v; want ErrJob", j, err)
			}
		}
	})
}

// Every catalogued name is "<home>.<what>", once.
func TestCatalogue(t *testing.T) {
	seen := map[string]bool{}
	for _, n := range Names() {
		if seen[n] {
			t.Errorf("%s is in the catalogue twice", n)
		}
		seen[n] = true
		if !validName(n) {
			t.Errorf("%q: a job name is <home>.<what> in lower case with underscores", n)
		}
	}
}

func validName(n string) bool {
	dot := 0
	for i, r := range n {
		switch {
		case r == '.':
			dot++
			if i == 0 || i == len(n)-1 {
				return false
			}
		case r == '_' || (r >= 'a' && r <= 'z'):
		default:
			return false
		}
	}
	return dot == 1
}
