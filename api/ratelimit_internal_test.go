package api

import (
	"fmt"
	"testing"
	"time"
)

// The limiter's table is bounded under a flood of random keys, and the flood cannot
// reset a known key's bucket (the old table was cleared when full, which handed the
// flooder a fresh bucket).
func TestLimiterMemoryIsBounded(t *testing.T) {
	t.Parallel()
	l := newLimiter(0.001, 2) // a token every 1000 s: nothing refills during the flood
	l.max = 100
	now := time.Unix(1_700_000_000, 0)
	for range 2 {
		if ok, _ := l.take("victim", now); !ok {
			t.Fatal("fresh bucket refused")
		}
	}
	if ok, _ := l.take("victim", now); ok {
		t.Fatal("third token granted")
	}
	for i := range 10_000 {
		now = now.Add(time.Millisecond)
		l.take(fmt.Sprintf("flood-%d", i), now)
		if n := l.size(); n > l.max {
			t.Fatalf("%d buckets, bound %d", n, l.max)
		}
	}
	if ok, _ := l.take("victim", now); ok {
		t.Fatal("the flood handed the exhausted key a fresh bucket")
	}
	// Once every bucket has refilled, the full ones are swept and room returns.
	now = now.Add(3000 * time.Second)
	if ok, _ := l.take("newcomer", now); !ok {
		t.Fatal("a newcomer after the flood is refused")
	}
	if n := l.size(); n > 2 {
		t.Fatalf("%d buckets after the sweep, want the full ones dropped", n)
	}
}

// While the table is full of active buckets, newcomers share one overflow bucket
// instead of each getting a fresh one.
func TestLimiterOverflowIsShared(t *testing.T) {
	t.Parallel()
	l := newLimiter(0.001, 1)
	l.max = 10
	now := time.Unix(1_700_000_000, 0)
	for i := range 10 {
		l.take(fmt.Sprintf("active-%d", i), now) // each spends its only token
	}
	granted := 0
	for i := range 50 {
		if ok, _ := l.take(fmt.Sprintf("newcomer-%d", i), now.Add(2*time.Second)); ok {
			granted++
		}
	}
	if granted != 1 {
		t.Fatalf("%d newcomers granted while the table was full, want 1 (the shared bucket's burst)", granted)
	}
}
