package history_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"paysvc/cmd/paysvc/service/servicetest/history"
)

// The checker against exhaustive search: small random histories, recorded
// through the Recorder with random overlaps, and decided by trying every order
// that respects real time (every unknown write also placed nowhere). Any
// disagreement is a checker bug: a pass it should not give, or a failure the
// fault tests would chase for nothing.

type refOp struct {
	in      history.Input
	out     string // "ok", "refused", "balance", "unknown"
	balance int64
}

type refHistory struct {
	initial map[string]int64
	ops     []refOp
	events  []int // op index; its first occurrence begins it, the second ends it
}

// apply is the specification, written out separately from the package's.
func (h refHistory) legalStep(bal map[string]int64, o refOp, fire bool) bool {
	switch in := o.in.(type) {
	case history.Read:
		return o.out == "unknown" || bal[in.Wallet] == o.balance
	case history.Deposit:
		if o.out == "ok" || (o.out == "unknown" && fire) {
			bal[in.Wallet] += in.Cents
		}
		return true
	case history.Transfer:
		if in.From == in.To {
			return true
		}
		enough := bal[in.From] >= in.Cents
		if o.out == "refused" {
			return !enough
		}
		if o.out == "ok" && !enough {
			return false
		}
		if enough && (o.out == "ok" || fire) {
			bal[in.From] -= in.Cents
			bal[in.To] += in.Cents
		}
		return true
	}
	return false
}

func (h refHistory) linearizable() bool {
	n := len(h.ops)
	begin, end := make([]int, n), make([]int, n)
	for i := range end {
		end[i] = -1
	}
	seen := make([]bool, n)
	for pos, i := range h.events {
		if !seen[i] {
			seen[i], begin[i] = true, pos
		} else if h.ops[i].out != "unknown" {
			end[i] = pos
		}
	}
	bal := map[string]int64{}
	for w, c := range h.initial {
		bal[w] = c
	}
	placed := make([]bool, n)
	var try func(left int) bool
	try = func(left int) bool {
		if left == 0 {
			return true
		}
		for i := range n {
			if placed[i] {
				continue
			}
			ready := true
			for j := range n {
				if !placed[j] && j != i && end[j] >= 0 && end[j] < begin[i] {
					ready = false
				}
			}
			if !ready {
				continue
			}
			for _, fire := range []bool{true, false} {
				if !fire && h.ops[i].out != "unknown" {
					continue
				}
				saved := map[string]int64{}
				for w, c := range bal {
					saved[w] = c
				}
				if h.legalStep(bal, h.ops[i], fire) {
					placed[i] = true
					if try(left - 1) {
						return true
					}
					placed[i] = false
				}
				bal = saved
			}
		}
		return false
	}
	return try(n)
}

// randomHistory picks operations, an interleaving of their calls and answers,
// and answers from one sequential execution at random points inside each
// interval (an unknown write at a random later point or never), then perhaps
// changes one answer, so that about half the histories are legal.
func randomHistory(rng *rand.Rand, maxOps, unknownOneIn int) refHistory {
	wallets := []string{"W1", "W2", "W3"}[:2+rng.IntN(2)]
	h := refHistory{initial: map[string]int64{}}
	for _, w := range wallets {
		h.initial[w] = 10 * rng.Int64N(4)
	}
	n := 1 + rng.IntN(maxOps)
	w := func() string { return wallets[rng.IntN(len(wallets))] }
	for range n {
		cents := 10 * (1 + rng.Int64N(3))
		var in history.Input
		switch rng.IntN(3) {
		case 0:
			in = history.Deposit{Wallet: w(), Cents: cents}
		case 1:
			in = history.Transfer{From: w(), To: w(), Cents: cents}
		default:
			in = history.Read{Wallet: w()}
		}
		h.ops = append(h.ops, refOp{in: in})
	}
	// Interleave: each op's begin before its end.
	var pool []int
	for i := range n {
		pool = append(pool, i, i)
	}
	rng.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
	h.events = pool
	// A linearization point for each op inside its interval (event positions;
	// fractional points break ties); unknown writes may take effect later or
	// never.
	type point struct {
		at float64
		op int
	}
	first, second := make([]int, n), make([]int, n)
	seen := make([]bool, n)
	for pos, i := range pool {
		if !seen[i] {
			seen[i], first[i] = true, pos
		} else {
			second[i] = pos
		}
	}
	unknown := make([]bool, n)
	var points []point
	for i := range n {
		lo, hi := float64(first[i]), float64(second[i])
		if _, read := h.ops[i].in.(history.Read); !read && rng.IntN(unknownOneIn) == 0 {
			unknown[i] = true
			hi = float64(len(pool))
			if rng.IntN(3) == 0 {
				continue // never takes effect
			}
		}
		points = append(points, point{lo + (hi-lo)*rng.Float64(), i})
	}
	for i := range points {
		for j := i + 1; j < len(points); j++ {
			if points[j].at < points[i].at {
				points[i], points[j] = points[j], points[i]
			}
		}
	}
	bal := map[string]int64{}
	for w, c := range h.initial {
		bal[w] = c
	}
	for i := range h.ops {
		h.ops[i].out = "unknown"
	}
	for _, p := range points {
		o := &h.ops[p.op]
		switch in := o.in.(type) {
		case history.Read:
			o.out, o.balance = "balance", bal[in.Wallet]
		case history.Deposit:
			bal[in.Wallet] += in.Cents
			o.out = "ok"
		case history.Transfer:
			if bal[in.From] >= in.Cents {
				bal[in.From] -= in.Cents
				bal[in.To] += in.Cents
				o.out = "ok"
			} else {
				o.out = "refused"
			}
		}
	}
	for i := range h.ops {
		if unknown[i] {
			h.ops[i].out = "unknown"
		}
	}
	if rng.IntN(3) != 0 {
		o := &h.ops[rng.IntN(n)]
		switch {
		case isRead(o.in):
			o.out, o.balance = "balance", o.balance+[]int64{-20, -10, 10, 20}[rng.IntN(4)]
		case o.out == "ok":
			o.out = "refused"
		case o.out == "refused":
			o.out = "ok"
		default:
			o.out = []string{"ok", "refused"}[rng.IntN(2)]
		}
	}
	return h
}

func (h refHistory) record() *history.Recorder {
	r := history.NewRecorder()
	for w, c := range h.initial {
		r.Initial(w, c)
	}
	r.VisualizeIn("")
	pending := map[int]*history.Pending{}
	for _, i := range h.events {
		p, begun := pending[i]
		if !begun {
			pending[i] = r.Begin(i, h.ops[i].in)
			continue
		}
		switch o := h.ops[i]; o.out {
		case "ok":
			p.Ok()
		case "refused":
			p.Refused()
		case "balance":
			p.Balance(o.balance)
		default:
			p.Unknown()
		}
	}
	return r
}

func (h refHistory) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "initial %v\n", h.initial)
	seen := map[int]bool{}
	for _, i := range h.events {
		if !seen[i] {
			seen[i] = true
			fmt.Fprintf(&b, "  begin %d %#v\n", i, h.ops[i].in)
		} else {
			fmt.Fprintf(&b, "  end   %d %s %d\n", i, h.ops[i].out, h.ops[i].balance)
		}
	}
	return b.String()
}

func TestAgreesWithExhaustiveSearch(t *testing.T) {
	for _, c := range []struct{ maxOps, unknownOneIn int }{{6, 4}, {8, 2}} {
		t.Run(fmt.Sprintf("%d ops, 1 in %d unknown", c.maxOps, c.unknownOneIn), func(t *testing.T) {
			agree(t, c.maxOps, c.unknownOneIn)
		})
	}
}

func agree(t *testing.T, maxOps, unknownOneIn int) {
	rng := rand.New(rand.NewPCG(11, uint64(maxOps)))
	cases := 3000
	if testing.Short() {
		cases = 300
	}
	legal := 0
	for k := range cases {
		h := randomHistory(rng, maxOps, unknownOneIn)
		want := h.linearizable()
		_, err := h.record().Check(10 * time.Second)
		if err != nil && strings.Contains(err.Error(), "unknown after") {
			t.Fatalf("case %d undecided: %v\n%s", k, err, h)
		}
		if got := err == nil; got != want {
			t.Fatalf("case %d: Check says linearizable=%v, exhaustive search %v; error: %v\n%s", k, got, want, err, h)
		}
		if want {
			legal++
		}
	}
	t.Logf("%d cases, %d linearizable", cases, legal)
	if legal < cases/5 || legal > cases*4/5 {
		t.Errorf("%d of %d cases linearizable: the generator no longer tests both sides", legal, cases)
	}
}
