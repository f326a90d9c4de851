package history

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/anishathalye/porcupine"
)

type opKind uint8

const (
	kindDeposit opKind = iota
	kindTransfer
	kindRead
)

// call is porcupine's Input: an operation with its wallets as indexes into the
// partition's wallets, so that balances are a small slice rather than a map.
type call struct {
	kind  opKind
	a, b  int // Wallet or From; To
	cents int64
}

// answer is porcupine's Output.
type answer struct {
	out     outcome // outOk, outRefused, outBalance or outUnknown
	balance int64
}

// balances are the wallets' balances, one entry per wallet of the partition.
type balances []int64

// state is the model's state. States are shared by every search branch that
// reached them, so no step changes one: it builds a new one.
//
// pending holds the unknown writes linearized so far that have not taken
// effect: each may take effect at any later moment, or never. Letting them
// wait in the state, rather than making porcupine find the moment by
// backtracking, is what keeps fault histories checkable: porcupine linearizes
// an unknown write as early as it can, and a write that took effect a second
// later (a command still in Kafka when the API process died) would otherwise
// be found only by undoing and reordering every operation in between, which
// did not finish in 10s for 79 such writes, 20ms late, in 5,000 operations. The
// accepted histories are the same either way: "linearized at t" and "in
// pending from t, taking effect at t' or never" describe the same orders.
type state struct {
	bal     balances
	pending []call // sorted by compareCalls, so that equal states are equal slices
}

func compareCalls(x, y call) int {
	return cmp.Or(cmp.Compare(x.kind, y.kind), cmp.Compare(x.a, y.a), cmp.Compare(x.b, y.b), cmp.Compare(x.cents, y.cents))
}

// Bounds of the search for the pending writes an observation needs. Reaching
// one makes the step incomplete (some orders unexplored), so the run can no
// longer prove a history illegal; exhausted records that, and Check reports
// such a run as undecided rather than failed.
const (
	maxRelevant   = 64
	maxFireVisits = 1 << 15
)

type model struct {
	names     []string
	start     balances
	exhausted atomic.Bool
}

// newModel is the model of one partition whose wallets are names, starting at
// start. It is nondeterministic (a set of states) only through the pending
// writes: one observation may be explained by different sets of them.
func newModel(names []string, start balances) (*model, porcupine.Model) {
	m := &model{names: names, start: start}
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{state{bal: start}} },
		Step: func(s, input, output any) []any {
			return m.step(s.(state), input.(call), output.(answer))
		},
		Equal: func(x, y any) bool {
			sx, sy := x.(state), y.(state)
			return slices.Equal(sx.bal, sy.bal) && slices.Equal(sx.pending, sy.pending)
		},
		// The checker's cache of visited (operations, state) pairs is keyed by
		// this hash; without it every state of a step lands in one bucket.
		Hash: func(x any) uint64 {
			s := x.(state)
			h := uint64(14695981039346656037)
			mix := func(v int64) { h = (h ^ uint64(v)) * 1099511628211 }
			for _, v := range s.bal {
				mix(v)
			}
			for _, p := range s.pending {
				mix(int64(p.kind)<<56 ^ int64(p.a)<<40 ^ int64(p.b)<<24 ^ p.cents)
			}
			return h
		},
		DescribeOperation: func(input, output any) string {
			return describeCall(names, input.(call)) + " = " + describeAnswer(output.(answer))
		},
		DescribeState: func(x any) string {
			s := x.(state)
			d := describeBalances(names, s.bal)
			if len(s.pending) > 0 {
				var p []string
				for _, c := range s.pending {
					p = append(p, describeCall(names, c))
				}
				d += " pending{" + strings.Join(p, ", ") + "}"
			}
			return d
		},
	}
	return m, nm.ToModel()
}

// apply is the sequential specification of a write taking effect: a deposit
// adds; a transfer moves when From holds enough and otherwise does nothing;
// a transfer to the same wallet does nothing.
func apply(bal balances, c call) balances {
	switch {
	case c.kind == kindDeposit:
		n := slices.Clone(bal)
		n[c.a] += c.cents
		return n
	case c.kind == kindTransfer && c.a != c.b && bal[c.a] >= c.cents:
		n := slices.Clone(bal)
		n[c.a] -= c.cents
		n[c.b] += c.cents
		return n
	}
	return bal
}

// observes is the wallet whose balance decides whether a known answer is
// legal: a read's, or a transfer's From; deposits and self-transfers have any
// answer in any state.
func observes(c call) (int, bool) {
	if c.kind == kindRead || (c.kind == kindTransfer && c.a != c.b) {
		return c.a, true
	}
	return 0, false
}

// legal is whether answer a to c is possible with balances bal, for c an
// observation.
func legal(bal balances, c call, a answer) bool {
	switch {
	case c.kind == kindRead:
		return bal[c.a] == a.balance
	case a.out == outOk:
		return bal[c.a] >= c.cents
	default: // refused
		return bal[c.a] < c.cents
	}
}

func (m *model) step(s state, c call, a answer) []any {
	if a.out == outUnknown {
		if c.kind == kindRead || (c.kind == kindTransfer && c.a == c.b) {
			return []any{s} // an unknown read or self-transfer changes nothing
		}
		n := state{bal: s.bal, pending: slices.Clone(s.pending)}
		i, _ := slices.BinarySearchFunc(n.pending, c, compareCalls)
		n.pending = slices.Insert(n.pending, i, c)
		return []any{n}
	}
	if _, ok := observes(c); !ok {
		if a.out == outRefused {
			return []any{s}
		}
		return []any{state{bal: apply(s.bal, c), pending: s.pending}}
	}
	// Pending writes take effect only when an observation needs them, and then
	// only as many as it needs: one that could have waited past the
	// observation is still pending afterwards, which allows every order that
	// firing it now would.
	if legal(s.bal, c, a) {
		return []any{m.after(state{bal: s.bal, pending: s.pending}, c, a)}
	}
	var out []any
	for _, f := range m.fire(s, c, a) {
		out = append(out, m.after(f, c, a))
	}
	return out
}

// after is the state once the observation c, legal in s, is done.
func (m *model) after(s state, c call, a answer) state {
	if c.kind == kindTransfer && a.out == outOk {
		return state{bal: apply(s.bal, c), pending: s.pending}
	}
	return s
}

// fire returns the states in which some pending writes of s have taken effect,
// in some order, making answer a to c legal.
//
// It fires only writes that change the observed wallet w, and writes that add
// to the From of a transfer it may fire (they may enable it). Any other write
// can wait until after the observation, where it remains pending: it does not
// change what c sees, and waiting cannot disable it, because what comes before
// it then only adds to its From or takes away what it would have left. For the
// same reason it stops at the first point a sequence makes the answer legal,
// and keeps only the smallest sets of fired writes: the writes a larger set
// adds can still take effect later.
func (m *model) fire(s state, c call, a answer) []state {
	w := c.a
	changesW := func(p call) bool {
		return p.kind == kindDeposit && p.a == w || p.kind == kindTransfer && p.a != p.b && (p.a == w || p.b == w)
	}
	in := make([]bool, len(s.pending))
	var rel []int
	froms := map[int]bool{} // Froms of relevant transfers into other wallets' chains
	for grew := true; grew; {
		grew = false
		for i, p := range s.pending {
			if in[i] {
				continue
			}
			adds := p.kind == kindDeposit && froms[p.a] || p.kind == kindTransfer && p.a != p.b && froms[p.b]
			if !changesW(p) && !adds {
				continue
			}
			if len(rel) == maxRelevant {
				m.exhausted.Store(true)
				continue
			}
			in[i], grew = true, true
			rel = append(rel, i)
			if p.kind == kindTransfer && p.a != w {
				froms[p.a] = true
			}
		}
	}
	slices.Sort(rel)

	var found []uint64
	var foundBal []balances
	visited := map[uint64]bool{}
	var visit func(mask uint64, bal balances)
	visit = func(mask uint64, bal balances) {
		if visited[mask] {
			return
		}
		if len(visited) >= maxFireVisits {
			m.exhausted.Store(true)
			return
		}
		visited[mask] = true
		if mask != 0 && legal(bal, c, a) {
			found = append(found, mask)
			foundBal = append(foundBal, bal)
			return
		}
		// Prune when the unfired writes cannot reach a legal balance even
		// ignoring whether they are enabled.
		var up, down int64
		for k, i := range rel {
			if p := s.pending[i]; mask&(1<<k) == 0 && changesW(p) {
				if p.kind == kindTransfer && p.a == w {
					down += p.cents
				} else {
					up += p.cents
				}
			}
		}
		switch {
		case c.kind == kindRead && (bal[w]+up < a.balance || bal[w]-down > a.balance),
			c.kind == kindTransfer && a.out == outOk && bal[w]+up < c.cents,
			c.kind == kindTransfer && a.out == outRefused && bal[w]-down >= c.cents:
			return
		}
		for k, i := range rel {
			p := s.pending[i]
			if mask&(1<<k) != 0 {
				continue
			}
			// Equal writes are interchangeable: fire the first unfired one.
			if k > 0 && mask&(1<<(k-1)) == 0 && s.pending[rel[k-1]] == p {
				continue
			}
			// A transfer that cannot move now would do nothing; leaving it
			// pending keeps the same choices open.
			if p.kind == kindTransfer && bal[p.a] < p.cents {
				continue
			}
			visit(mask|1<<k, apply(bal, p))
		}
	}
	visit(0, s.bal)

	var out []state
	for f, mask := range found {
		smallest := true
		for _, other := range found {
			if other != mask && other&mask == other {
				smallest = false
				break
			}
		}
		if !smallest {
			continue
		}
		var rest []call
		fired := map[int]bool{}
		for k, i := range rel {
			if mask&(1<<k) != 0 {
				fired[i] = true
			}
		}
		for i, p := range s.pending {
			if !fired[i] {
				rest = append(rest, p) // still sorted: s.pending is
			}
		}
		out = append(out, state{bal: foundBal[f], pending: rest})
	}
	return out
}

func describeCall(names []string, c call) string {
	switch c.kind {
	case kindDeposit:
		return fmt.Sprintf("deposit %s %d", names[c.a], c.cents)
	case kindTransfer:
		return fmt.Sprintf("transfer %s->%s %d", names[c.a], names[c.b], c.cents)
	default:
		return fmt.Sprintf("read %s", names[c.a])
	}
}

func describeAnswer(a answer) string {
	switch a.out {
	case outOk:
		return "ok"
	case outRefused:
		return "refused"
	case outBalance:
		return fmt.Sprintf("%d", a.balance)
	default:
		return "unknown"
	}
}

func describeBalances(names []string, s balances) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = fmt.Sprintf("%s=%d", names[i], v)
	}
	return strings.Join(parts, " ")
}

// infinity is the return time of an operation whose outcome is unknown.
const infinity = math.MaxInt64
