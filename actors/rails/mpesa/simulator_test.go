package mpesa

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"paysvc/actors/values/money"
	"paysvc/actors/values/waittest"
)

// fastOpts are millisecond delays for tests.
var fastOpts = SimOptions{
	AcceptDelay: 5 * time.Millisecond,
	FinalDelay:  10 * time.Millisecond,
	RetryMin:    time.Millisecond,
	RetryMax:    5 * time.Millisecond,
}

// collector is a Sink recording what it receives, with arrival times.
type collector struct {
	mu  sync.Mutex
	got []Result
	at  []time.Time
}

func newCollector() *collector { return &collector{} }

func (c *collector) sink(_ context.Context, r Result) error {
	c.mu.Lock()
	c.got = append(c.got, r)
	c.at = append(c.at, time.Now())
	c.mu.Unlock()
	return nil
}

// waitFinal waits for the FINAL result of invoice and returns every result
// of that invoice in arrival order, with arrival times.
func (c *collector) waitFinal(t *testing.T, invoice string, within time.Duration) ([]Result, []time.Time) {
	t.Helper()
	var rs []Result
	var ats []time.Time
	waittest.Eventually(t, within, func() (bool, string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		rs, ats = nil, nil
		final := false
		for i, r := range c.got {
			if r.InvoiceID == invoice {
				rs = append(rs, r)
				ats = append(ats, c.at[i])
				final = final || r.Stage == StageFinal
			}
		}
		return final, fmt.Sprintf("no FINAL result for %s (got %+v)", invoice, rs)
	})
	return rs, ats
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}

func req(invoice, phone string, amount string) STKRequest {
	return STKRequest{InvoiceID: invoice, MerchantID: "M1", Phone: phone, Amount: money.MustParse(amount), AccountRef: "ACC", Description: "Test"}
}

var (
	checkoutIDRE = regexp.MustCompile(`^ws_CO_\d{26}$`)
	simReceiptRE = regexp.MustCompile(`^SIM[0-9A-Z]{7}$`)
)

func TestSimulatorMagicOutcomes(t *testing.T) {
	cases := []struct {
		phone    string
		code     int
		accepted bool
		timeout  bool
	}{
		{"254708374149", CodeSuccess, true, false}, // Safaricom's public test number
		{"254712345678", CodeSuccess, true, false},
		{"254700000001", CodeCancelled, false, false},
		{"254700000002", CodeUnreachable, false, true},
		{"254700000003", CodeInsufficientFunds, true, false},
		{"254700000004", CodeWrongPIN, true, false},
		{"254700000005", CodeSubscriberBusy, false, false},
		{"254711110006", CodeExpired, false, true},
		{"254700010000", CodeSuccess, true, false}, // 0000 is not magic
	}
	c := newCollector()
	opt := fastOpts
	s := NewSimulator(c.sink, opt)
	defer s.Close()
	opt = opt.withDefaults()

	start := map[string]time.Time{}
	ids := map[string]string{}
	for i, tc := range cases {
		inv := "INV" + tc.phone
		start[inv] = time.Now()
		id, err := s.Push(context.Background(), req(inv, tc.phone, "150"))
		if err != nil {
			t.Fatalf("case %d: Push: %v", i, err)
		}
		if !checkoutIDRE.MatchString(id) {
			t.Errorf("CheckoutRequestID %q does not look like Daraja's", id)
		}
		ids[inv] = id
	}
	for _, tc := range cases {
		inv := "INV" + tc.phone
		rs, ats := c.waitFinal(t, inv, 5*time.Second)
		wantStages := []string{StageFinal}
		if tc.accepted {
			wantStages = []string{StageAccepted, StageFinal}
		}
		if len(rs) != len(wantStages) {
			t.Fatalf("%s: got %d results %+v, want stages %v", tc.phone, len(rs), rs, wantStages)
		}
		for i, r := range rs {
			if r.Stage != wantStages[i] {
				t.Errorf("%s: result %d stage %s, want %s", tc.phone, i, r.Stage, wantStages[i])
			}
			if r.InvoiceID != inv || r.MerchantID != "M1" || r.CheckoutRequestID != ids[inv] {
				t.Errorf("%s: ids not carried: %+v", tc.phone, r)
			}
		}
		fin := rs[len(rs)-1]
		if fin.Code != tc.code || fin.Description != ResultDesc(tc.code) {
			t.Errorf("%s: final code %d %q, want %d %q", tc.phone, fin.Code, fin.Description, tc.code, ResultDesc(tc.code))
		}
		if fin.Success() != (tc.code == 0) {
			t.Errorf("%s: Success() = %v", tc.phone, fin.Success())
		}
		if tc.code == CodeSuccess {
			if !simReceiptRE.MatchString(fin.Receipt) {
				t.Errorf("%s: receipt %q", tc.phone, fin.Receipt)
			}
			if !fin.Amount.Equal(money.MustParse("150")) || fin.Phone != tc.phone {
				t.Errorf("%s: amount %s phone %s", tc.phone, fin.Amount, fin.Phone)
			}
		} else if fin.Receipt != "" || !fin.Amount.IsZero() {
			t.Errorf("%s: failure carries receipt %q amount %s", tc.phone, fin.Receipt, fin.Amount)
		}
		if tc.accepted && rs[0].Success() {
			t.Errorf("%s: ACCEPTED must not count as success", tc.phone)
		}
		// Delays are lower bounds (the scheduler may add, never subtract).
		finalAfter := ats[len(ats)-1].Sub(start[inv])
		switch {
		case tc.accepted:
			if got := ats[0].Sub(start[inv]); got < opt.AcceptDelay {
				t.Errorf("%s: ACCEPTED after %s, want >= %s", tc.phone, got, opt.AcceptDelay)
			}
			if finalAfter < opt.AcceptDelay+opt.FinalDelay {
				t.Errorf("%s: FINAL after %s", tc.phone, finalAfter)
			}
		case tc.timeout:
			if finalAfter < opt.TimeoutDelay {
				t.Errorf("%s: timeout FINAL after %s, want >= %s", tc.phone, finalAfter, opt.TimeoutDelay)
			}
		default:
			if finalAfter < opt.AcceptDelay {
				t.Errorf("%s: FINAL after %s", tc.phone, finalAfter)
			}
		}
	}
}

func TestSimulatorValidates(t *testing.T) {
	s := NewSimulator(newCollector().sink, fastOpts)
	defer s.Close()
	bad := []STKRequest{
		req("I1", "0708374149", "10"),      // local format
		req("I1", "+254708374149", "10"),   // plus
		req("I1", "25470837414", "10"),     // short
		req("I1", "2547083741490", "10"),   // long
		req("I1", "255708374149", "10"),    // not Kenya
		req("I1", "254708374149", "0"),     // zero
		req("I1", "254708374149", "-5"),    // negative
		req("I1", "254708374149", "10.50"), // not whole
		req("", "254708374149", "10"),      // no invoice
	}
	for _, r := range bad {
		if _, err := s.Push(context.Background(), r); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("Push(%+v) = %v, want ErrInvalidRequest", r, err)
		}
	}
}

func TestSimulatorRetriesFailingSink(t *testing.T) {
	var calls atomic.Int32
	c := newCollector()
	sink := func(ctx context.Context, r Result) error {
		n := calls.Add(1)
		switch {
		case n <= 3:
			return errors.New("database down")
		case n == 4:
			panic("sink bug")
		}
		return c.sink(ctx, r)
	}
	s := NewSimulator(sink, fastOpts)
	defer s.Close()
	if _, err := s.Push(context.Background(), req("I1", "254708374149", "10")); err != nil {
		t.Fatal(err)
	}
	rs, _ := c.waitFinal(t, "I1", 5*time.Second)
	if len(rs) != 2 || rs[0].Stage != StageAccepted || !rs[1].Success() {
		t.Fatalf("results %+v", rs)
	}
	if n := calls.Load(); n != 6 {
		t.Errorf("sink called %d times, want 6 (3 errors, 1 panic, 2 deliveries)", n)
	}
}

func TestSimulatorDeliveryOutlivesPushContext(t *testing.T) {
	type key struct{}
	var sawValue atomic.Bool
	c := newCollector()
	sink := func(ctx context.Context, r Result) error {
		if ctx.Value(key{}) == "trace-1" && ctx.Err() == nil {
			sawValue.Store(true)
		}
		return c.sink(ctx, r)
	}
	s := NewSimulator(sink, fastOpts)
	defer s.Close()
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "trace-1"))
	if _, err := s.Push(ctx, req("I1", "254708374149", "10")); err != nil {
		t.Fatal(err)
	}
	cancel() // the request that asked for the prompt is over; the outcome still comes
	c.waitFinal(t, "I1", 5*time.Second)
	if !sawValue.Load() {
		t.Error("sink context lost the Push context's values")
	}
}

func TestSimulatorCloseStopsCleanly(t *testing.T) {
	before := runtime.NumGoroutine()
	c := newCollector()
	s := NewSimulator(c.sink, SimOptions{AcceptDelay: time.Hour, FinalDelay: time.Hour})
	for i := range 50 {
		if _, err := s.Push(context.Background(), req("I"+string(rune('A'+i%26)), "254708374149", "10")); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not return")
	}
	if err := s.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
	if _, err := s.Push(context.Background(), req("I1", "254708374149", "10")); !errors.Is(err, ErrClosed) {
		t.Errorf("Push after Close = %v, want ErrClosed", err)
	}
	if n := c.count(); n != 0 {
		t.Errorf("sink called %d times", n)
	}
	waitGoroutines(t, before)
}

func TestSimulatorCloseInterruptsBlockedAndFailingSinks(t *testing.T) {
	before := runtime.NumGoroutine()
	var blocked, failing atomic.Int32
	sink := func(ctx context.Context, r Result) error {
		if r.InvoiceID == "block" {
			blocked.Add(1)
			<-ctx.Done() // a sink stuck on a slow database honours ctx
			return ctx.Err()
		}
		failing.Add(1)
		return errors.New("always down")
	}
	s := NewSimulator(sink, fastOpts)
	for _, inv := range []string{"block", "fail"} {
		if _, err := s.Push(context.Background(), req(inv, "254708374149", "10")); err != nil {
			t.Fatal(err)
		}
	}
	waittest.Eventually(t, 5*time.Second, func() (bool, string) {
		b, f := blocked.Load(), failing.Load()
		return b > 0 && f > 2, fmt.Sprintf("%d calls of the blocked sink, %d of the failing one; want one and three", b, f)
	})
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not return")
	}
	waitGoroutines(t, before)
}

func TestSimulatorBoundedInFlight(t *testing.T) {
	s := NewSimulator(newCollector().sink, SimOptions{AcceptDelay: time.Hour, MaxInFlight: 2})
	defer s.Close()
	for i := range 2 {
		if _, err := s.Push(context.Background(), req("I"+string(rune('0'+i)), "254708374149", "10")); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err := s.Push(ctx, req("I3", "254708374149", "10"))
	if !errors.Is(err, ErrBusy) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third Push = %v, want ErrBusy wrapping DeadlineExceeded", err)
	}
}

func TestSimulatorFloodKeepsGoroutinesBounded(t *testing.T) {
	const limit = 4
	before := runtime.NumGoroutine()
	var inSink, maxInSink, maxGoroutines atomic.Int32
	c := newCollector()
	sink := func(ctx context.Context, r Result) error {
		n := inSink.Add(1)
		defer inSink.Add(-1)
		for m := maxInSink.Load(); n > m && !maxInSink.CompareAndSwap(m, n); m = maxInSink.Load() {
		}
		g := int32(runtime.NumGoroutine())
		for m := maxGoroutines.Load(); g > m && !maxGoroutines.CompareAndSwap(m, g); m = maxGoroutines.Load() {
		}
		time.Sleep(time.Millisecond) // a sink that takes a while: the flood piles up behind it
		return c.sink(ctx, r)
	}
	s := NewSimulator(sink, SimOptions{AcceptDelay: time.Millisecond, FinalDelay: time.Millisecond, MaxInFlight: limit})
	const n = 200
	for i := range n {
		if _, err := s.Push(context.Background(), req("F"+strconv.Itoa(i), "254708374149", "10")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		c.waitFinal(t, "F"+strconv.Itoa(i), 10*time.Second)
	}
	s.Close()
	if m := maxInSink.Load(); m > limit {
		t.Errorf("%d sink calls at once, limit %d", m, limit)
	}
	// The test goroutine plus at most `limit` simulator goroutines (and a
	// little slack for the runtime).
	if g := maxGoroutines.Load(); int(g) > before+limit+2 {
		t.Errorf("%d goroutines during the flood, %d before", g, before)
	}
	if got := c.count(); got != 2*n {
		t.Errorf("%d results, want %d", got, 2*n)
	}
}

func TestSimulatorIDsUnique(t *testing.T) {
	s := NewSimulator(newCollector().sink, SimOptions{AcceptDelay: time.Hour})
	defer s.Close()
	seen := map[string]bool{}
	for i := range 500 {
		id, err := s.Push(context.Background(), req("U"+strconv.Itoa(i), "254708374149", "10"))
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] || !checkoutIDRE.MatchString(id) {
			t.Fatalf("id %q duplicate or malformed", id)
		}
		seen[id] = true
	}
	fixed := time.Date(2024, 3, 1, 21, 30, 5, 123_000_000, time.UTC)
	if id := NewCheckoutRequestID(fixed); id[:23] != "ws_CO_02032024003005123" {
		t.Errorf("id %q: want the EAT timestamp 02032024003005 and millis 123", id)
	}
}

// waitGoroutines waits until no more than want goroutines run.
func waitGoroutines(t *testing.T, want int) {
	t.Helper()
	waittest.Eventually(t, 2*time.Second, func() (bool, string) {
		n := runtime.NumGoroutine()
		return n <= want, fmt.Sprintf("%d goroutines remain, want <= %d", n, want)
	})
}
