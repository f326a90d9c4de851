package retry

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// Deliver calls sink with r until it succeeds or ctx ends, waiting between tries
// a jittered backoff that starts at minWait and doubles up to maxWait. It reports
// whether r was delivered.
func Deliver[R any](ctx context.Context, sink func(context.Context, R) error, r R, minWait, maxWait time.Duration) bool {
	wait := minWait
	for {
		if err := call(ctx, sink, r); err == nil {
			return true
		}
		if !Sleep(ctx, Backoff(wait)) {
			return false
		}
		wait = min(2*wait, maxWait)
	}
}

// call turns a panicking sink into an error, so one bad result cannot take the
// process down; it is retried like any failure.
func call[R any](ctx context.Context, sink func(context.Context, R) error, r R) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("retry: sink panicked: %v", v)
		}
	}()
	return sink(ctx, r)
}

// Sleep waits d or until ctx ends; it reports whether d elapsed.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Backoff returns a duration in [d/2, d): tries of many results spread out
// instead of landing on the sink together.
func Backoff(d time.Duration) time.Duration {
	if d < 2 {
		return d
	}
	return d/2 + time.Duration(rand.Int64N(int64(d/2)))
}

// Limits fills in the defaults of a simulator's limits left zero: 1024 requests
// in flight, and a backoff from 100ms doubling up to 10s (or to retryMin, when
// that is longer).
func Limits(maxInFlight int, retryMin, retryMax time.Duration) (int, time.Duration, time.Duration) {
	if maxInFlight <= 0 {
		maxInFlight = 1024
	}
	if retryMin <= 0 {
		retryMin = 100 * time.Millisecond
	}
	if retryMax < retryMin {
		retryMax = max(10*time.Second, retryMin)
	}
	return maxInFlight, retryMin, retryMax
}
