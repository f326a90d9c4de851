package history

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The search for a short bad history must only report histories whose failure
// proves the recorded one fails; otherwise it can drift to a different,
// invented violation (drop the deposit a read saw, and that read now shows money
// from nowhere). So it only makes moves that keep every linearizable history
// linearizable:
//
//   - cut the history at a time T: operations invoked after T go, those
//     answered after T become unknown. A linearization of the whole history,
//     restricted to what happened by T, with the unknown ones moved last where
//     they changed nothing observed, is one of the prefix.
//   - drop an operation that changes no balance in any linearization: a read, a
//     refused operation, a transfer to itself.
//   - fold an acknowledged write into the start balances when every operation
//     that observes its wallets (reads them, or transfers from them) was invoked
//     after it returned: it then precedes all of them in every linearization,
//     and commutes with the rest, so it can be moved first. A transfer folds
//     only if the start balance covers it.
//   - drop a write, acknowledged or unknown, that nothing observing its wallets
//     can follow: no observer returned after it was invoked.
//
// Every move is followed by a porcupine run, and kept only if the history still
// fails; the moves are tried on halves, then quarters, ... of the operations
// (delta debugging), so a few essential operations in thousands cost a few
// dozen runs rather than one per operation.
type search struct {
	names     []string
	deadline  time.Time
	checks    int
	maxChecks int
}

func (s *search) spent() bool {
	return s.checks >= s.maxChecks || !time.Now().Before(s.deadline)
}

// illegal reports whether porcupine proved the history non-linearizable within
// the budget; running out of budget counts as not proved.
func (s *search) illegal(start balances, ops []op) bool {
	if s.spent() {
		return false
	}
	s.checks++
	res, _ := checkPartition(s.names, start, ops, time.Until(s.deadline))
	return res == porcupine.Illegal
}

// cutAt is the history as it stood at time t.
func cutAt(ops []op, t int64) []op {
	var out []op
	for _, o := range ops {
		if o.call > t {
			break
		}
		if o.ret > t {
			if o.c.kind == kindRead {
				continue
			}
			if o.a.out != outUnknown {
				o.lateAnswer = o.a.out
			}
			o.a, o.ret = answer{out: outUnknown}, infinity
		}
		out = append(out, o)
	}
	return out
}

// shortestPrefix binary-searches the earliest cut that still fails. Failing is
// monotone in the cut time (a failing prefix is a prefix of every later cut), so
// a cut that is not proved to fail is passed over, never reported. culprit is
// the id of the operation whose answer ends that prefix: the first answer no
// order of what came before explains (-1 when no cut was proved).
func (s *search) shortestPrefix(start balances, ops []op) (prefix []op, culprit int) {
	var rets []int64
	for _, o := range ops {
		if o.ret != infinity {
			rets = append(rets, o.ret)
		}
	}
	slices.Sort(rets)
	rets = slices.Compact(rets)
	lo, hi := 0, len(rets) // hi == len(rets): the whole history, known to fail
	for lo < hi && !s.spent() {
		mid := (lo + hi) / 2
		if s.illegal(start, cutAt(ops, rets[mid])) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if hi == len(rets) {
		return ops, -1
	}
	prefix = cutAt(ops, rets[hi])
	for _, o := range prefix {
		if o.ret == rets[hi] {
			culprit = o.id
		}
	}
	return prefix, culprit
}

// writes are the wallets an operation can change.
func writes(c call) []int {
	switch {
	case c.kind == kindDeposit:
		return []int{c.a}
	case c.kind == kindTransfer && c.a != c.b:
		return []int{c.a, c.b}
	}
	return nil
}

func changesNothing(o op) bool {
	return o.c.kind == kindRead || o.a.out == outRefused || (o.c.kind == kindTransfer && o.c.a == o.c.b)
}

// apply makes the moves available to the operations in set, in the order that
// lets one enable the next (drops, then folds from the earliest, then trailing
// drops from the latest), and returns the new history and the ids moved.
func (s *search) apply(start balances, ops []op, set map[int]bool) (balances, []op, []int, int) {
	removed := make([]bool, len(ops))
	var moved []int
	folds := 0
	for i, o := range ops {
		if set[o.id] && changesNothing(o) {
			removed[i] = true
			moved = append(moved, o.id)
		}
	}
	// Observers of each wallet by position, in order of invocation and of
	// return; scans skip those removed on the way.
	byCall := make([][]int, len(s.names))
	for i, o := range ops {
		if w, ok := observes(o.c); ok && !removed[i] {
			byCall[w] = append(byCall[w], i)
		}
	}
	byRet := make([][]int, len(s.names))
	for w, l := range byCall {
		byRet[w] = slices.Clone(l)
		slices.SortFunc(byRet[w], func(x, y int) int { return cmp.Compare(ops[y].ret, ops[x].ret) })
	}
	firstCall := func(w, except int) int64 {
		for _, i := range byCall[w] {
			if !removed[i] && i != except {
				return ops[i].call
			}
		}
		return infinity
	}
	lastRet := func(w, except int) int64 {
		for _, i := range byRet[w] {
			if !removed[i] && i != except {
				return ops[i].ret
			}
		}
		return -1
	}

	st := slices.Clone(start)
	for i, o := range ops {
		if removed[i] || !set[o.id] || o.a.out != outOk {
			continue
		}
		ws := writes(o.c)
		ok := len(ws) > 0 && (o.c.kind == kindDeposit || st[o.c.a] >= o.c.cents)
		for _, w := range ws {
			ok = ok && firstCall(w, i) > o.ret
		}
		if !ok {
			continue
		}
		if o.c.kind == kindDeposit {
			st[o.c.a] += o.c.cents
		} else {
			st[o.c.a] -= o.c.cents
			st[o.c.b] += o.c.cents
		}
		removed[i] = true
		moved = append(moved, o.id)
		folds++
	}
	for i := len(ops) - 1; i >= 0; i-- {
		o := ops[i]
		if removed[i] || !set[o.id] {
			continue
		}
		ws := writes(o.c)
		ok := len(ws) > 0
		for _, w := range ws {
			ok = ok && lastRet(w, i) < o.call
		}
		if ok {
			removed[i] = true
			moved = append(moved, o.id)
		}
	}
	var rest []op
	for i, o := range ops {
		if !removed[i] {
			rest = append(rest, o)
		}
	}
	return st, rest, moved, folds
}

// shrink reduces a failing history by delta debugging over its operations.
func (s *search) shrink(start balances, ops []op) (balances, []op, int) {
	folded := 0
	cands := make([]int, len(ops))
	for i, o := range ops {
		cands[i] = o.id
	}
	chunk := max(1, len(cands)/2)
	for !s.spent() && len(cands) > 0 {
		changed := false
		var keep []int
		for i := 0; i < len(cands); i += chunk {
			part := cands[i:min(i+chunk, len(cands))]
			set := map[int]bool{}
			for _, id := range part {
				set[id] = true
			}
			nst, nops, moved, folds := s.apply(start, ops, set)
			if len(moved) == 0 || !s.illegal(nst, nops) {
				keep = append(keep, part...)
				continue
			}
			start, ops, folded, changed = nst, nops, folded+folds, true
			for _, id := range part {
				if !slices.Contains(moved, id) {
					keep = append(keep, id)
				}
			}
		}
		cands = keep
		if !changed {
			if chunk == 1 {
				break
			}
			chunk = max(1, chunk/2)
		}
	}
	return start, ops, folded
}

// maxLines bounds the operations describe prints: a reduced history of a busy
// partition can still be long, and the visualization has all of it.
const maxLines = 40

// describe writes the shortest bad history found in p, one operation a line.
func (s *search) describe(b *strings.Builder, p *partition) {
	prefix, culprit := s.shortestPrefix(p.start, p.ops)
	prefixChecks := s.checks
	start, ops, folded := s.shrink(p.start, prefix)
	stopped := ""
	if s.spent() {
		stopped = ", stopped by its budget"
	}
	line := func(o op) string {
		end := "inf"
		if o.ret != infinity {
			end = millis(o.ret)
		}
		l := fmt.Sprintf("  c%d [%s, %s] %s = %s", o.client, millis(o.call), end, describeCall(s.names, o.c), describeAnswer(o.a))
		if o.lateAnswer != outPending {
			l += fmt.Sprintf(" (answered %s after this prefix)", describeAnswer(answer{out: o.lateAnswer}))
		}
		return l + "\n"
	}
	for _, o := range ops {
		if o.id == culprit {
			fmt.Fprintf(b, "first answer that no order of the operations before it explains:\n%s", line(o))
		}
	}
	fmt.Fprintf(b, "shortest bad history found: %d ops (the first %d by invocation, found in %d checks, then reduced in %d more%s):\n",
		len(ops), len(prefix), prefixChecks, s.checks-prefixChecks, stopped)

	seen := map[int]bool{}
	for _, o := range ops {
		seen[o.c.a] = true
		if o.c.kind == kindTransfer {
			seen[o.c.b] = true
		}
	}
	var used []string
	for w := range s.names {
		if seen[w] {
			used = append(used, fmt.Sprintf("%s=%d", s.names[w], start[w]))
		}
	}
	fmt.Fprintf(b, "  start: %s", strings.Join(used, " "))
	if folded > 0 {
		fmt.Fprintf(b, " (with %d acknowledged writes folded in, each before every later observer of its wallets)", folded)
	}
	b.WriteString("\n")
	for i, o := range ops {
		// The end of a long history is where the culprit is.
		if len(ops) > maxLines && i >= maxLines/4 && i < len(ops)-maxLines*3/4 {
			if i == maxLines/4 {
				fmt.Fprintf(b, "  ... %d operations not shown ...\n", len(ops)-maxLines)
			}
			continue
		}
		b.WriteString(line(o))
	}
}

// millis formats nanoseconds since the recorder started as milliseconds with
// one decimal, in integers.
func millis(ns int64) string {
	return fmt.Sprintf("%d.%dms", ns/1e6, ns%1e6/1e5)
}
