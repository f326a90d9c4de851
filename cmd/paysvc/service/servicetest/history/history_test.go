package history_test

import (
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"paysvc/cmd/paysvc/service/servicetest/history"
)

// bank is a correct, linearizable stand-in for the service: every operation
// takes effect at one instant under its lock. bug, when set, may change an
// answer, to make the histories the checker must catch.
type bank struct {
	mu  sync.Mutex
	bal map[string]int64
	bug func(in history.Input, ok bool, balance int64) (bool, int64)
}

func newBank(r *history.Recorder, initial map[string]int64) *bank {
	b := &bank{bal: map[string]int64{}}
	for w, c := range initial {
		b.bal[w] = c
		r.Initial(w, c)
	}
	return b
}

// do applies in; ok is false for a refused transfer.
func (b *bank) do(in history.Input) (ok bool, balance int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ok = true
	switch in := in.(type) {
	case history.Deposit:
		b.bal[in.Wallet] += in.Cents
	case history.Transfer:
		if b.bal[in.From] < in.Cents {
			ok = false
		} else {
			b.bal[in.From] -= in.Cents
			b.bal[in.To] += in.Cents
		}
	case history.Read:
		balance = b.bal[in.Wallet]
	}
	if b.bug != nil {
		ok, balance = b.bug(in, ok, balance)
	}
	return ok, balance
}

// call runs in against the bank as a client would and records it.
func call(r *history.Recorder, b *bank, client int, in history.Input) {
	p := r.Begin(client, in)
	ok, balance := b.do(in)
	end(p, in, ok, balance)
}

func end(p *history.Pending, in history.Input, ok bool, balance int64) {
	switch {
	case isRead(in):
		p.Balance(balance)
	case ok:
		p.Ok()
	default:
		p.Refused()
	}
}

func isRead(in history.Input) bool {
	_, ok := in.(history.Read)
	return ok
}

// randomOp is a deposit, transfer or read among wallets, amounts in tens of
// cents so that balances stay multiples of ten.
func randomOp(rng *rand.Rand, wallets []string) history.Input {
	w := func() string { return wallets[rng.IntN(len(wallets))] }
	cents := 10 * (1 + rng.Int64N(20))
	switch n := rng.IntN(10); {
	case n < 3:
		return history.Deposit{Wallet: w(), Cents: cents}
	case n < 6:
		return history.Transfer{From: w(), To: w(), Cents: cents}
	default:
		return history.Read{Wallet: w()}
	}
}

type workload struct {
	clients, perClient int
	wallets            []string
	firstClient        int
	// unknownEvery makes every n-th write of a client end Unknown, the bank
	// applying it at once, never, or a little later, as a killed process or a
	// broker that held the request would.
	unknownEvery int
	seed         uint64
}

// run drives the workload against b with real goroutines and returns the
// number of operations that ended Unknown.
func (w workload) run(t *testing.T, r *history.Recorder, b *bank) int {
	t.Helper()
	var wg, late sync.WaitGroup
	var mu sync.Mutex
	unknown := 0
	for c := range w.clients {
		client := w.firstClient + c
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(w.seed, uint64(client)))
			writes := 0
			for range w.perClient {
				in := randomOp(rng, w.wallets)
				if !isRead(in) {
					writes++
				}
				if isRead(in) || w.unknownEvery == 0 || writes%w.unknownEvery != 0 {
					call(r, b, client, in)
					continue
				}
				p := r.Begin(client, in)
				switch rng.IntN(3) {
				case 0:
					b.do(in)
				case 1:
				case 2:
					delay := time.Duration(rng.IntN(2000)) * time.Microsecond
					late.Go(func() {
						time.Sleep(delay) // applied after its client gave up: the lateness is what is tested
						b.do(in)
					})
				}
				p.Unknown()
				mu.Lock()
				unknown++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	late.Wait()
	return unknown
}

var opLine = regexp.MustCompile(`(?m)^  c\d+ \[.*$`)

// mustFail checks r, expects a violation and returns the shortest history's
// operation lines.
func mustFail(t *testing.T, r *history.Recorder) []string {
	t.Helper()
	r.VisualizeIn(t.TempDir())
	rep, err := r.Check(10 * time.Second)
	if err == nil {
		t.Fatalf("history passed, want a violation (%+v)", rep)
	}
	msg := err.Error()
	t.Logf("%+v\n%s", rep, msg)
	if !strings.Contains(msg, "not linearizable") {
		t.Fatalf("error is not a violation: %v", err)
	}
	m := regexp.MustCompile(`visualization of the partition: (\S+)`).FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("error names no visualization: %v", err)
	}
	html, err := os.ReadFile(m[1])
	if err != nil || !strings.Contains(string(html), "<html") {
		t.Fatalf("visualization %s: %v", m[1], err)
	}
	return shortest(msg)
}

// shortest is the operation lines of the shortest bad history in a Check error.
func shortest(msg string) []string {
	_, history, _ := strings.Cut(msg, "shortest bad history found")
	return opLine.FindAllString(history, -1)
}

func mustPass(t *testing.T, r *history.Recorder) history.Report {
	t.Helper()
	rep, err := r.Check(10 * time.Second)
	if err != nil {
		t.Fatalf("a legal history failed: %v", err)
	}
	return rep
}

func TestLegalConcurrentHistoryPasses(t *testing.T) {
	r := history.NewRecorder()
	b := newBank(r, map[string]int64{"W1": 1000, "W2": 500, "W3": 0})
	w := workload{clients: 8, perClient: 150, wallets: []string{"W1", "W2", "W3"}, unknownEvery: 40, seed: 1}
	unknown := w.run(t, r, b)
	rep := mustPass(t, r)
	t.Logf("%+v", rep)
	if rep.Operations != 8*150 || r.Len() != 8*150 {
		t.Errorf("Operations = %d, Len = %d, want %d", rep.Operations, r.Len(), 8*150)
	}
	if rep.Unknown != unknown || unknown == 0 {
		t.Errorf("Unknown = %d, want %d (> 0)", rep.Unknown, unknown)
	}
	if rep.Partitions != 1 {
		t.Errorf("Partitions = %d, want 1", rep.Partitions)
	}
}

func TestStaleReadAfterAcknowledgedWriteFails(t *testing.T) {
	r := history.NewRecorder()
	b := newBank(r, map[string]int64{"W1": 500, "W2": 300})
	// Legal traffic first, so the search has something to cut away.
	rng := rand.New(rand.NewPCG(2, 2))
	for range 60 {
		call(r, b, rng.IntN(3), randomOp(rng, []string{"W1", "W2"}))
	}
	_, old := b.do(history.Read{Wallet: "W1"})
	call(r, b, 0, history.Deposit{Wallet: "W1", Cents: 100})
	r.Begin(1, history.Read{Wallet: "W1"}).Balance(old)
	for range 20 {
		call(r, b, rng.IntN(3), randomOp(rng, []string{"W1", "W2"}))
	}

	lines := mustFail(t, r)
	if len(lines) == 0 || len(lines) > 3 {
		t.Fatalf("shortest history has %d operations, want 1..3: %q", len(lines), lines)
	}
	want := "read W1 = " + formatInt(old)
	if !strings.Contains(strings.Join(lines, "\n"), want) {
		t.Errorf("shortest history does not name the stale read %q: %q", want, lines)
	}
}

func formatInt(n int64) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	if neg {
		d = append([]byte{'-'}, d...)
	}
	return string(d)
}

// seq records operations one after another on the client's behalf, for
// histories written out by hand.
type seq struct{ r *history.Recorder }

func (s seq) ok(c int, in history.Input)      { s.r.Begin(c, in).Ok() }
func (s seq) refused(c int, in history.Input) { s.r.Begin(c, in).Refused() }
func (s seq) unknown(c int, in history.Input) { s.r.Begin(c, in).Unknown() }
func (s seq) read(c int, w string, cents int64) {
	s.r.Begin(c, history.Read{Wallet: w}).Balance(cents)
}

func start(balances map[string]int64) (*history.Recorder, seq) {
	r := history.NewRecorder()
	for w, c := range balances {
		r.Initial(w, c)
	}
	return r, seq{r}
}

func TestWrongBalancesFail(t *testing.T) {
	move := history.Transfer{From: "W1", To: "W2", Cents: 100}

	t.Run("lost acknowledged transfer", func(t *testing.T) {
		r, s := start(map[string]int64{"W1": 100})
		s.ok(0, move)
		s.read(1, "W1", 100)
		s.read(1, "W2", 0)
		mustFail(t, r)
	})
	t.Run("doubled deposit", func(t *testing.T) {
		r, s := start(map[string]int64{"W1": 0})
		s.ok(0, history.Deposit{Wallet: "W1", Cents: 50})
		s.read(1, "W1", 100)
		mustFail(t, r)
	})
	t.Run("unknown transfer that happened", func(t *testing.T) {
		r, s := start(map[string]int64{"W1": 100})
		s.unknown(0, move)
		s.read(1, "W1", 0)
		s.read(1, "W2", 100)
		mustPass(t, r)
	})
	t.Run("unknown transfer that did not happen", func(t *testing.T) {
		r, s := start(map[string]int64{"W1": 100})
		s.unknown(0, move)
		s.read(1, "W1", 100)
		s.read(1, "W2", 0)
		mustPass(t, r)
	})
	t.Run("unknown transfer that happened later", func(t *testing.T) {
		r, s := start(map[string]int64{"W1": 100})
		s.unknown(0, move)
		s.read(1, "W1", 100)
		s.read(1, "W2", 0)
		s.read(1, "W1", 0)
		s.read(1, "W2", 100)
		rep := mustPass(t, r)
		if rep.Unknown != 1 {
			t.Errorf("Unknown = %d, want 1", rep.Unknown)
		}
	})
	t.Run("unknown transfer that happened by halves", func(t *testing.T) {
		r, s := start(map[string]int64{"W1": 100})
		s.unknown(0, move)
		s.read(1, "W1", 0)
		s.read(1, "W2", 0)
		mustFail(t, r)
	})
	t.Run("unknown transfer undone", func(t *testing.T) {
		r, s := start(map[string]int64{"W1": 100})
		s.unknown(0, move)
		s.read(1, "W2", 100)
		s.read(1, "W2", 0)
		mustFail(t, r)
	})
	t.Run("refused transfer that shows up", func(t *testing.T) {
		// The refusal is legal where the transfer overlaps the deposit only if
		// the transfer came first, when W1 was empty; then it cannot show.
		r, s := start(map[string]int64{"W1": 0})
		p := r.Begin(0, move)
		s.ok(1, history.Deposit{Wallet: "W1", Cents: 100})
		p.Refused()
		s.read(2, "W1", 0)
		s.read(2, "W2", 100)
		mustFail(t, r)
	})
	t.Run("same history with the transfer unknown passes", func(t *testing.T) {
		r, s := start(map[string]int64{"W1": 0})
		p := r.Begin(0, move)
		s.ok(1, history.Deposit{Wallet: "W1", Cents: 100})
		p.Unknown()
		s.read(2, "W1", 0)
		s.read(2, "W2", 100)
		mustPass(t, r)
	})
	t.Run("refused with sufficient funds", func(t *testing.T) {
		r, s := start(map[string]int64{"W1": 100})
		s.refused(0, move)
		lines := mustFail(t, r)
		if len(lines) != 1 || !strings.Contains(lines[0], "transfer W1->W2 100 = refused") {
			t.Errorf("shortest history %q, want the refused transfer alone", lines)
		}
	})
	t.Run("refused with insufficient funds passes", func(t *testing.T) {
		r, s := start(map[string]int64{"W1": 99})
		s.refused(0, move)
		s.read(1, "W1", 99)
		s.read(1, "W2", 0)
		mustPass(t, r)
	})
	t.Run("acknowledged without funds", func(t *testing.T) {
		r, s := start(map[string]int64{"W1": 99})
		s.ok(0, move)
		mustFail(t, r)
	})
	t.Run("transfer to itself is a no-op either way", func(t *testing.T) {
		r, s := start(map[string]int64{"W1": 100})
		s.ok(0, history.Transfer{From: "W1", To: "W1", Cents: 100})
		s.refused(0, history.Transfer{From: "W1", To: "W1", Cents: 100})
		s.read(1, "W1", 100)
		mustPass(t, r)
	})
	t.Run("refused deposit not applied", func(t *testing.T) {
		r, s := start(nil)
		s.refused(0, history.Deposit{Wallet: "W1", Cents: 100})
		s.read(1, "W1", 100)
		mustFail(t, r)
	})
}

func TestMerchantsAreSeparatePartitions(t *testing.T) {
	r := history.NewRecorder()
	b := newBank(r, map[string]int64{"A1": 1000, "B1": 1000})
	var wg sync.WaitGroup
	wg.Go(func() {
		workload{clients: 3, perClient: 200, wallets: []string{"A1", "A2"}, seed: 4}.run(t, r, b)
	})
	wg.Go(func() {
		workload{clients: 3, perClient: 200, wallets: []string{"B1", "B2"}, firstClient: 3, seed: 5}.run(t, r, b)
	})
	wg.Wait()
	rep := mustPass(t, r)
	if rep.Partitions != 2 {
		t.Fatalf("Partitions = %d, want 2", rep.Partitions)
	}

	// A bad answer in B's wallets is reported in B's partition alone.
	_, bal := b.do(history.Read{Wallet: "B2"})
	r.Begin(6, history.Read{Wallet: "B2"}).Balance(bal + 5)
	lines := mustFail(t, r)
	joined := strings.Join(lines, "\n")
	if !strings.Contains(joined, "read B2 = "+formatInt(bal+5)) || strings.Contains(joined, "A") {
		t.Errorf("shortest history %q, want B2's bad read and nothing of A", lines)
	}
}

func TestFiveThousandOperations(t *testing.T) {
	r := history.NewRecorder()
	b := newBank(r, map[string]int64{"W1": 5000, "W2": 5000, "W3": 0, "W4": 0})
	w := workload{clients: 4, perClient: 1250, wallets: []string{"W1", "W2", "W3", "W4"}, unknownEvery: 100, seed: 6}
	w.run(t, r, b)
	rep := mustPass(t, r)
	t.Logf("checked %d ops (%d unknown) in %d partitions in %v", rep.Operations, rep.Unknown, rep.Partitions, rep.Took)
	if rep.Operations != 5000 {
		t.Errorf("Operations = %d, want 5000", rep.Operations)
	}
}

func TestFiveThousandOperationsWithOneBadRead(t *testing.T) {
	r := history.NewRecorder()
	b := newBank(r, map[string]int64{"W1": 5000, "W2": 5000, "W3": 0, "W4": 0})
	var reads sync.Mutex
	n := 0
	// Balances stay multiples of ten, so a read 5 cents off matches no state.
	b.bug = func(in history.Input, ok bool, balance int64) (bool, int64) {
		if isRead(in) {
			reads.Lock()
			defer reads.Unlock()
			if n++; n == 1000 {
				return ok, balance + 5
			}
		}
		return ok, balance
	}
	w := workload{clients: 4, perClient: 1250, wallets: []string{"W1", "W2", "W3", "W4"}, unknownEvery: 100, seed: 7}
	w.run(t, r, b)
	began := time.Now()
	r.VisualizeIn(t.TempDir())
	_, err := r.Check(30 * time.Second)
	t.Logf("found and reduced in %v", time.Since(began))
	if err == nil {
		t.Fatal("a read of money that never existed passed")
	}
	culprit := regexp.MustCompile(`first answer that no order of the operations before it explains:\n  c\d+ \[.*\] read W\d = \d*5\n`)
	if !culprit.MatchString(err.Error()) {
		t.Errorf("error does not name the bad read as the first unexplained answer:\n%.3000s", err)
	}
	if lines := shortest(err.Error()); len(lines) > 40 {
		t.Errorf("error prints %d operations, want at most 40", len(lines))
	}
	t.Logf("%.2500s", err)
}

func TestUndecidedIsAnError(t *testing.T) {
	r := history.NewRecorder()
	b := newBank(r, map[string]int64{"W1": 100})
	workload{clients: 4, perClient: 100, wallets: []string{"W1", "W2"}, seed: 8}.run(t, r, b)
	_, err := r.Check(time.Nanosecond)
	if err == nil || !strings.Contains(err.Error(), "unknown after 1ns: history of 400 ops") {
		t.Fatalf("Check with no time: %v, want an unknown error", err)
	}
}

func TestConcurrentUse(t *testing.T) {
	r := history.NewRecorder()
	b := newBank(r, nil)
	var wg sync.WaitGroup
	for c := range 16 {
		wg.Go(func() {
			wallet := []string{"X1", "X2", "X3", "X4"}[c%4]
			// Starting balances of a wallet of one's own, set while others record.
			own := "own" + formatInt(int64(c))
			r.Initial(own, 10)
			call(r, b, c, history.Deposit{Wallet: own, Cents: 10})
			b.mu.Lock()
			b.bal[own] += 10
			b.mu.Unlock()
			call(r, b, c, history.Read{Wallet: own})
			rng := rand.New(rand.NewPCG(9, uint64(c)))
			for range 100 {
				call(r, b, c, randomOp(rng, []string{wallet, "X5"}))
				_ = r.Len()
			}
		})
	}
	// A check while clients record sees the operations in flight as unknown.
	wg.Go(func() {
		for range 3 {
			if _, err := r.Check(10 * time.Second); err != nil {
				t.Errorf("check during recording: %v", err)
			}
		}
	})
	wg.Wait()
	rep := mustPass(t, r)
	if rep.Operations != 16*102 || rep.Unknown != 0 {
		t.Errorf("report %+v, want %d operations, none unknown", rep, 16*102)
	}
}

func TestMisuse(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", name)
			}
		}()
		f()
	}
	r := history.NewRecorder()
	p := r.Begin(0, history.Deposit{Wallet: "W1", Cents: 1})
	p.Ok()
	mustPanic("ending twice", p.Ok)
	mustPanic("a deposit's balance", func() { r.Begin(0, history.Deposit{Wallet: "W1", Cents: 1}).Balance(1) })
	mustPanic("a read acknowledged", func() { r.Begin(0, history.Read{Wallet: "W1"}).Ok() })
	mustPanic("a zero amount", func() { r.Begin(0, history.Transfer{From: "W1", To: "W2"}) })
	mustPanic("a negative client", func() { r.Begin(-1, history.Read{Wallet: "W1"}) })
}
