package payout

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"paysvc/actors/values/money"
	"paysvc/actors/values/waittest"
	"paysvc/topics"
)

const testDelay = 20 * time.Millisecond

// delivery is one PayoutResults a sink took, with its arrival time.
type delivery struct {
	r  topics.PayoutResults
	at time.Time
}

// collector is a Sink recording what it takes.
type collector struct {
	mu  sync.Mutex
	got []delivery
}

func newCollector() *collector { return &collector{} }

func (c *collector) sink(_ context.Context, r topics.PayoutResults) error {
	c.mu.Lock()
	c.got = append(c.got, delivery{r: r, at: time.Now()})
	c.mu.Unlock()
	return nil
}

func (c *collector) snapshot() []delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]delivery(nil), c.got...)
}

// wait returns the first n deliveries, failing the test after a few seconds.
func (c *collector) wait(t *testing.T, n int) []delivery {
	t.Helper()
	var got []delivery
	waittest.Eventually(t, 5*time.Second, func() (bool, string) {
		got = c.snapshot()
		return len(got) >= n, fmt.Sprintf("got %d deliveries, want %d: %+v", len(got), n, got)
	})
	return got[:n]
}

// quiet waits until the simulator has played every request it took to its end
// (each holds a slot until its last result is delivered or abandoned: Submit),
// so nothing more can come, and fails the test unless exactly n deliveries came.
func (b *bundle) quiet(t *testing.T, n int) {
	t.Helper()
	waittest.Eventually(t, 5*time.Second, func() (bool, string) {
		n := b.sim.pool.Held()
		return n == 0, fmt.Sprintf("%d requests still in flight, %d deliveries so far", n, len(b.col.snapshot()))
	})
	if got := b.col.snapshot(); len(got) != n {
		t.Fatalf("got %d deliveries, want exactly %d: %+v", len(got), n, got)
	}
}

type bundle struct {
	sim *Simulator
	col *collector
}

func setup(t *testing.T, opt Options) *bundle {
	t.Helper()
	if opt.Delay == 0 {
		opt.Delay = testDelay
	}
	if opt.RetryMin == 0 {
		opt.RetryMin, opt.RetryMax = time.Millisecond, 5*time.Millisecond
	}
	col := newCollector()
	sim := NewSimulator(col.sink, opt)
	t.Cleanup(func() { _ = sim.Close() })
	return &bundle{sim: sim, col: col}
}

func txn(id, account, amount string) topics.PayoutRailTxn {
	return topics.PayoutRailTxn{TransactionID: id, Account: account, Amount: money.MustParse(amount)}
}

func mixedRequest() topics.PayoutRailRequest {
	return topics.PayoutRailRequest{FileID: "FILE1", MerchantID: "M1", Provider: ProviderMpesaB2C, Currency: "KES", Chunk: 3,
		Transactions: []topics.PayoutRailTxn{
			txn("T1", "254712345678", "100.00"),
			txn("T2", "254712340011", "100.00"),
			txn("T3", "254712340012", "250.50"),
			txn("T4", "254712340013", "10.00"),
			txn("T5", "254712340014", "75.00"),
			txn("T6", "254700009999", "1.00"),
		}}
}

var (
	mpesaRef = regexp.MustCompile(`^[A-Z][A-Z0-9]{9}$`)
	pslRef   = regexp.MustCompile(`^PSL[0-9]{10}$`)
	rtgsRef  = regexp.MustCompile(`^RTGS[0-9]{10}$`)
	airRef   = regexp.MustCompile(`^AIR[0-9]{10}$`)
)

func TestSimulator(t *testing.T) {
	t.Parallel()

	t.Run("MixedAccounts_SubmittedFinalLate", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Options{})
		start := time.Now()
		if err := b.sim.Submit(context.Background(), mixedRequest()); err != nil {
			t.Fatal(err)
		}
		got := b.col.wait(t, 3)

		sub := got[0].r
		if sub.FileID != "FILE1" || sub.MerchantID != "M1" || sub.Stage != topics.PayoutStageSubmitted || sub.Batch != "c3" {
			t.Fatalf("first delivery = %+v, want SUBMITTED c3 of FILE1 for M1", sub)
		}
		var subIDs []string
		for _, r := range sub.Results {
			if r != (topics.PayoutTxnResult{TransactionID: r.TransactionID}) {
				t.Errorf("SUBMITTED result %+v carries more than its transaction id", r)
			}
			subIDs = append(subIDs, r.TransactionID)
		}
		if want := []string{"T1", "T2", "T3", "T4", "T5", "T6"}; !reflect.DeepEqual(subIDs, want) {
			t.Errorf("SUBMITTED ids = %v, want %v", subIDs, want)
		}
		if d := got[0].at.Sub(start); d >= testDelay/2 {
			t.Errorf("SUBMITTED came %v after Submit, want at once", d)
		}

		fin := got[1].r
		if fin.FileID != "FILE1" || fin.MerchantID != "M1" || fin.Stage != topics.PayoutStageFinal || fin.Batch != "c3" {
			t.Fatalf("second delivery = %+v, want FINAL c3", fin)
		}
		if d := got[1].at.Sub(start); d < testDelay*9/10 {
			t.Errorf("FINAL came %v after Submit, want at least %v", d, testDelay*9/10)
		}
		want := []topics.PayoutTxnResult{
			{TransactionID: "T1", Success: true, ProviderAccountName: "SANDBOX USER 5678"},
			{TransactionID: "T2", Description: "Invalid recipient account"},
			{TransactionID: "T3", Description: "Transaction limit exceeded for the recipient"},
			{TransactionID: "T4", Description: "Provider unavailable: MPESA-B2C did not accept the transaction"},
			{TransactionID: "T6", Success: true, ProviderAccountName: "SANDBOX USER 9999"},
		}
		checkResults(t, fin.Results, want, mpesaRef)

		late := got[2].r
		if late.FileID != "FILE1" || late.MerchantID != "M1" || late.Stage != topics.PayoutStageFinal || late.Batch != "c3-late" {
			t.Fatalf("third delivery = %+v, want FINAL c3-late", late)
		}
		if d := got[2].at.Sub(start); d < 3*testDelay*9/10 {
			t.Errorf("late FINAL came %v after Submit, want at least %v", d, 3*testDelay*9/10)
		}
		checkResults(t, late.Results, []topics.PayoutTxnResult{
			{TransactionID: "T5", Success: true, ProviderAccountName: "SANDBOX USER 0014"},
		}, mpesaRef)
		if fin.Results[0].ProviderReference == fin.Results[4].ProviderReference {
			t.Errorf("two transactions share reference %s", fin.Results[0].ProviderReference)
		}

		b.quiet(t, 3)
	})

	t.Run("Providers_ReferencesAndNames", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			provider, account, accountType, bank, name string
			ref                                        *regexp.Regexp
		}{
			{ProviderMpesaB2B, "247247", AccountTypePayBill, "", "SANDBOX BUSINESS 247247", mpesaRef},
			{ProviderPesalink, "1234567890", "", "68", "SANDBOX ACCOUNT HOLDER 7890", pslRef},
			{ProviderRTGS, "000123456789", "", "01", "SANDBOX ACCOUNT HOLDER 6789", rtgsRef},
			{ProviderAirtime, "254712345678", "", "", "SANDBOX USER 5678", airRef},
		} {
			t.Run(c.provider, func(t *testing.T) {
				t.Parallel()
				b := setup(t, Options{})
				tx := txn("T1", c.account, "500.00")
				tx.AccountType, tx.BankCode = c.accountType, c.bank
				bad := txn("T2", "99990013", "500.00")
				req := topics.PayoutRailRequest{FileID: "F-" + c.provider, MerchantID: "M1", Provider: c.provider, Chunk: 0,
					Transactions: []topics.PayoutRailTxn{tx, bad}}
				if err := b.sim.Submit(context.Background(), req); err != nil {
					t.Fatal(err)
				}
				got := b.col.wait(t, 2)
				if got[1].r.Batch != "c0" || got[1].r.Stage != topics.PayoutStageFinal {
					t.Fatalf("second delivery = %+v, want FINAL c0", got[1].r)
				}
				checkResults(t, got[1].r.Results, []topics.PayoutTxnResult{
					{TransactionID: "T1", Success: true, ProviderAccountName: c.name},
					{TransactionID: "T2", Description: "Provider unavailable: " + c.provider + " did not accept the transaction"},
				}, c.ref)
			})
		}
	})

	t.Run("Airtime_AmountLimit", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Options{})
		req := topics.PayoutRailRequest{FileID: "F-AIR", MerchantID: "M1", Provider: ProviderAirtime, Chunk: 1,
			Transactions: []topics.PayoutRailTxn{
				txn("AT1", "254712345678", "10000.00"),
				txn("AT2", "254712345678", "10000.01"),
				txn("AT3", "254712340014", "20000.00"), // the limit applies before the late suffix
			}}
		if err := b.sim.Submit(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		got := b.col.wait(t, 2)
		checkResults(t, got[1].r.Results, []topics.PayoutTxnResult{
			{TransactionID: "AT1", Success: true, ProviderAccountName: "SANDBOX USER 5678"},
			{TransactionID: "AT2", Description: "Airtime amount above the provider limit"},
			{TransactionID: "AT3", Description: "Airtime amount above the provider limit"},
		}, airRef)
		b.quiet(t, 2) // no late batch: nothing was late
	})

	t.Run("AllLate_NoEmptyFinalBatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Options{})
		req := topics.PayoutRailRequest{FileID: "F-LATE", MerchantID: "M1", Provider: ProviderMpesaB2C, Chunk: 7,
			Transactions: []topics.PayoutRailTxn{txn("L1", "254712340014", "5.00")}}
		if err := b.sim.Submit(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		got := b.col.wait(t, 2)
		if got[1].r.Batch != "c7-late" || len(got[1].r.Results) != 1 || !got[1].r.Results[0].Success {
			t.Fatalf("second delivery = %+v, want only the late batch c7-late", got[1].r)
		}
		b.quiet(t, 2)
	})

	t.Run("Redelivery_SameBatchesAndResults", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Options{})
		req := mixedRequest()
		for range 2 {
			if err := b.sim.Submit(context.Background(), req); err != nil {
				t.Fatal(err)
			}
		}
		other := mixedRequest()
		other.Chunk = 4
		if err := b.sim.Submit(context.Background(), other); err != nil {
			t.Fatal(err)
		}
		got := b.col.wait(t, 9)
		byKey := map[string][]topics.PayoutResults{}
		for _, d := range got {
			k := d.r.Stage + "/" + d.r.Batch
			byKey[k] = append(byKey[k], d.r)
		}
		var keys []string
		for k := range byKey {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		want := []string{"FINAL/c3", "FINAL/c3-late", "FINAL/c4", "FINAL/c4-late", "SUBMITTED/c3", "SUBMITTED/c4"}
		if !reflect.DeepEqual(keys, want) {
			t.Fatalf("batches = %v, want %v", keys, want)
		}
		for _, k := range want {
			rs := byKey[k]
			wantN := 1
			if strings.HasSuffix(k, "c3") || strings.HasSuffix(k, "c3-late") {
				wantN = 2
			}
			if len(rs) != wantN {
				t.Fatalf("%s delivered %d times, want %d", k, len(rs), wantN)
			}
			if wantN == 2 && !reflect.DeepEqual(rs[0], rs[1]) {
				t.Errorf("%s differs between deliveries:\n %+v\n %+v", k, rs[0], rs[1])
			}
		}
	})

	t.Run("FailingSink_Retried", func(t *testing.T) {
		t.Parallel()
		col := newCollector()
		var calls atomic.Int32
		sink := func(ctx context.Context, r topics.PayoutResults) error {
			switch calls.Add(1) {
			case 1:
				return errors.New("broker down")
			case 2:
				panic("sink bug")
			}
			return col.sink(ctx, r)
		}
		sim := NewSimulator(sink, Options{Delay: testDelay, RetryMin: time.Millisecond, RetryMax: 2 * time.Millisecond})
		t.Cleanup(func() { _ = sim.Close() })
		if err := sim.Submit(context.Background(), mixedRequest()); err != nil {
			t.Fatal(err)
		}
		got := col.wait(t, 3)
		if got[0].r.Stage != topics.PayoutStageSubmitted || got[1].r.Batch != "c3" || got[2].r.Batch != "c3-late" {
			t.Fatalf("deliveries = %+v, want SUBMITTED, c3, c3-late", got)
		}
		if n := calls.Load(); n != 5 {
			t.Fatalf("sink called %d times, want 5 (2 failures, 3 deliveries)", n)
		}
	})

	t.Run("Close_StopsPendingWork", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Options{Delay: time.Hour})
		begin := time.Now()
		if err := b.sim.Submit(context.Background(), mixedRequest()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(begin); d > time.Second {
			t.Fatalf("Submit took %v, want it to return at once", d)
		}
		b.col.wait(t, 1)
		closed := make(chan struct{})
		go func() { _ = b.sim.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not return")
		}
		if err := b.sim.Submit(context.Background(), mixedRequest()); !errors.Is(err, ErrClosed) {
			t.Fatalf("Submit after Close = %v, want ErrClosed", err)
		}
		if err := b.sim.Close(); err != nil {
			t.Fatalf("second Close = %v", err)
		}
		b.quiet(t, 1)
	})

	t.Run("Close_AbandonsFailingSink", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int32
		sawCancel := make(chan struct{})
		var once sync.Once
		sink := func(ctx context.Context, _ topics.PayoutResults) error {
			calls.Add(1)
			context.AfterFunc(ctx, func() { once.Do(func() { close(sawCancel) }) })
			return errors.New("always down")
		}
		sim := NewSimulator(sink, Options{Delay: testDelay, RetryMin: time.Millisecond, RetryMax: time.Millisecond})
		if err := sim.Submit(context.Background(), mixedRequest()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sim.Close() }) // also when the wait fails
		waittest.Eventually(t, 5*time.Second, func() (bool, string) {
			n := calls.Load()
			return n >= 3, fmt.Sprintf("sink called %d times, want retries", n)
		})
		if err := sim.Close(); err != nil {
			t.Fatal(err)
		}
		n := calls.Load()
		select {
		case <-sawCancel:
		case <-time.After(5 * time.Second):
			t.Fatal("the sink's context was not cancelled by Close")
		}
		// What could call the sink after Close is a request still holding its slot
		// (each holds one until its last result is delivered or abandoned): none is.
		if held := sim.pool.Held(); held != 0 {
			t.Fatalf("%d requests still hold a slot after Close returned: they may call the sink", held)
		}
		if calls.Load() != n {
			t.Fatal("the sink was called after Close returned")
		}
	})

	t.Run("Busy_WaitsForASlotUntilCtxEnds", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Options{Delay: time.Hour, MaxInFlight: 1})
		if err := b.sim.Submit(context.Background(), mixedRequest()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		if err := b.sim.Submit(ctx, mixedRequest()); !errors.Is(err, ErrBusy) {
			t.Fatalf("Submit with every slot taken = %v, want ErrBusy", err)
		}
	})

	t.Run("InvalidRequests_Refused", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Options{})
		tooMany := mixedRequest()
		tooMany.Transactions = nil
		for i := range topics.PayoutChunk + 1 {
			tooMany.Transactions = append(tooMany.Transactions, txn(fmt.Sprint("T", i), "254712345678", "1.00"))
		}
		for name, mutate := range map[string]func(*topics.PayoutRailRequest){
			"NoFileID":        func(r *topics.PayoutRailRequest) { r.FileID = "" },
			"NoMerchantID":    func(r *topics.PayoutRailRequest) { r.MerchantID = "" },
			"NoTransactions":  func(r *topics.PayoutRailRequest) { r.Transactions = nil },
			"P2P":             func(r *topics.PayoutRailRequest) { r.Provider = "P2P" },
			"Intasend":        func(r *topics.PayoutRailRequest) { r.Provider = "INTASEND" },
			"NoProvider":      func(r *topics.PayoutRailRequest) { r.Provider = "" },
			"LowerCase":       func(r *topics.PayoutRailRequest) { r.Provider = "pesalink" },
			"NegativeChunk":   func(r *topics.PayoutRailRequest) { r.Chunk = -1 },
			"NoTransactionID": func(r *topics.PayoutRailRequest) { r.Transactions[2].TransactionID = "" },
			"DuplicateID":     func(r *topics.PayoutRailRequest) { r.Transactions[2].TransactionID = "T1" },
			"ZeroAmount":      func(r *topics.PayoutRailRequest) { r.Transactions[0].Amount = money.Zero() },
			"NegativeAmount":  func(r *topics.PayoutRailRequest) { r.Transactions[0].Amount = money.MustParse("-1.00") },
			"MoreThanAChunk":  func(r *topics.PayoutRailRequest) { r.Transactions = tooMany.Transactions },
		} {
			req := mixedRequest()
			mutate(&req)
			if err := b.sim.Submit(context.Background(), req); !errors.Is(err, ErrInvalidRequest) {
				t.Errorf("%s: Submit = %v, want ErrInvalidRequest", name, err)
			}
		}
		b.quiet(t, 0)
	})
}

// checkResults compares results with want, ignoring ProviderReference, which
// must match ref on successes and be empty on failures.
func checkResults(t *testing.T, got, want []topics.PayoutTxnResult, ref *regexp.Regexp) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("results = %+v, want %+v", got, want)
	}
	for i, r := range got {
		if r.Success && !ref.MatchString(r.ProviderReference) {
			t.Errorf("%s: reference %q does not match %s", r.TransactionID, r.ProviderReference, ref)
		}
		if !r.Success && r.ProviderReference != "" {
			t.Errorf("%s failed but has reference %q", r.TransactionID, r.ProviderReference)
		}
		r.ProviderReference = ""
		if r != want[i] {
			t.Errorf("result %d = %+v, want %+v", i, r, want[i])
		}
	}
}
