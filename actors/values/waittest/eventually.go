package waittest

import (
	"fmt"
	"testing"
	"time"
)

// The backoff between two looks at a condition: the first look is at once, the
// next after firstPause, and each pause doubles up to maxPause. A condition that
// holds within a few milliseconds is seen within a few; a slow one (a database
// count, a broker query) is asked at most twenty times a second.
const (
	firstPause = time.Millisecond
	maxPause   = 50 * time.Millisecond
)

// Eventually calls cond until it reports ok and then returns. If timeout passes
// first, it fails the test (t.Fatalf) with the why of cond's last call and the
// time waited. why says what is still missing ("3 of 10 deliveries"); it is read
// only when the wait fails, so it should be cheap to make: a description that
// costs queries belongs after a failed Wait.
//
// cond runs on the caller's goroutine, so it may call t.Fatal itself for an error
// that no wait can mend. Eventually, as t.Fatal, belongs on the test's goroutine;
// elsewhere, or where the test goes on after a failed wait, use Wait.
func Eventually(t testing.TB, timeout time.Duration, cond func() (ok bool, why string)) {
	t.Helper()
	if err := Wait(timeout, cond); err != nil {
		t.Fatal(err)
	}
}

// Wait is Eventually without the test: it returns nil as soon as cond reports ok,
// or, once timeout has passed, an error carrying cond's last why and the time
// waited. cond is called at least once, even with a timeout of zero.
func Wait(timeout time.Duration, cond func() (ok bool, why string)) error {
	start := time.Now()
	pause := firstPause
	for {
		ok, why := cond()
		if ok {
			return nil
		}
		waited := time.Since(start)
		if waited >= timeout {
			return fmt.Errorf("waited %v (limit %v): %s", waited.Round(time.Millisecond), timeout, why)
		}
		time.Sleep(min(pause, timeout-waited))
		pause = min(2*pause, maxPause)
	}
}
