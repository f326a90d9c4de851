package history

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// op is a record ready to check inside its partition.
type op struct {
	id        int // position in the recorder: the order of invocation
	client    int
	c         call
	a         answer
	call, ret int64
	// lateAnswer is the answer an operation got after the end of the prefix it
	// is part of; inside that prefix it is checked as unknown.
	lateAnswer outcome
}

// partition is one connected group of wallets and the operations on them, in
// order of invocation.
type partition struct {
	names []string
	start balances
	ops   []op
}

// Bounds of the search for a short bad history: each try is one porcupine run,
// and a failing test should still end soon.
const (
	maxShrinkChecks  = 200
	shrinkBudgetNoTO = 30 * time.Second // when Check was given no timeout
)

// Check checks the history recorded so far against the wallet model. It returns
// nil when every partition is linearizable. Otherwise the error's text is the
// shortest bad history found in the first failing partition, one operation a
// line, and names the file holding porcupine's visualization of that partition.
//
// timeout bounds porcupine's search over all partitions (0: no bound). A search
// that runs out of time is an error ("unknown after ..."), never a pass: an
// undecided history is not evidence of a correct service. When a history fails,
// the search for a shorter one takes at most maxShrinkChecks porcupine runs and
// another timeout (30s when timeout is 0).
//
// Operations not ended yet are checked as unknown, so Check may run while
// clients are still recording.
func (r *Recorder) Check(timeout time.Duration) (Report, error) {
	began := time.Now()
	r.mu.Lock()
	recs := slices.Clone(r.ops)
	initial := maps.Clone(r.initial)
	dir := r.dir
	r.mu.Unlock()

	rep := Report{Operations: len(recs)}
	for _, rec := range recs {
		if rec.out == outPending || rec.out == outUnknown {
			rep.Unknown++
		}
	}
	parts := partitionOps(recs, initial)
	rep.Partitions = len(parts)
	done := func(err error) (Report, error) {
		rep.Took = time.Since(began)
		return rep, err
	}

	var deadline time.Time
	if timeout > 0 {
		deadline = began.Add(timeout)
	}
	results, bounded := checkAll(parts, deadline)

	var failing, undecided []int
	for i, res := range results {
		switch res {
		case porcupine.Illegal:
			failing = append(failing, i)
		case porcupine.Unknown:
			undecided = append(undecided, i)
		}
	}
	if len(failing) > 0 {
		p := parts[failing[0]]
		var b strings.Builder
		fmt.Fprintf(&b, "history: not linearizable: wallets %s (%d of %d operations are in this partition",
			strings.Join(p.names, ", "), len(p.ops), len(recs))
		if len(failing) > 1 {
			fmt.Fprintf(&b, "; %d of %d partitions fail, this is the first", len(failing), len(parts))
		}
		if len(undecided) > 0 {
			fmt.Fprintf(&b, "; %d partitions undecided after %v", len(undecided), timeout)
		}
		b.WriteString(")\n")
		// The visualization first: it shows the whole partition, which is what
		// to look at when the short history below is not enough.
		var path string
		var verr error
		if dir != "" {
			path, verr = visualize(p, dir, timeout)
		}
		budget := timeout
		if budget <= 0 {
			budget = shrinkBudgetNoTO
		}
		s := &search{names: p.names, deadline: time.Now().Add(budget), maxChecks: maxShrinkChecks}
		s.describe(&b, p)
		switch {
		case dir == "":
			b.WriteString("porcupine visualization not written (VisualizeIn(\"\"))")
		case verr != nil:
			fmt.Fprintf(&b, "porcupine visualization of the partition not written: %v", verr)
		default:
			fmt.Fprintf(&b, "porcupine visualization of the partition: %s", path)
		}
		return done(errors.New(b.String()))
	}
	if len(undecided) > 0 {
		largest, nbounded := 0, 0
		for _, i := range undecided {
			largest = max(largest, len(parts[i].ops))
			if bounded[i] {
				nbounded++
			}
		}
		why := ""
		if nbounded > 0 {
			why = fmt.Sprintf("; in %d of them too many unknown writes were pending at once for the model's search", nbounded)
		}
		return done(fmt.Errorf("history: unknown after %v: history of %d ops (%d of %d partitions undecided, the largest has %d ops%s); an undecided history is not a pass",
			timeout, len(recs), len(undecided), len(parts), largest, why))
	}
	return done(nil)
}

// partitionOps splits the history into connected groups of wallets (joined by
// transfers), each with its wallets sorted by name and its operations in order
// of invocation. Unknown reads are left out: any balance satisfies them.
func partitionOps(recs []record, initial map[string]int64) []*partition {
	node := map[string]int{}
	var parent []int
	find := func(x int) int {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	walletNode := func(w string) int {
		n, ok := node[w]
		if !ok {
			n = len(parent)
			node[w] = n
			parent = append(parent, n)
		}
		return n
	}
	checked := func(rec record) bool {
		_, isRead := rec.in.(Read)
		return !isRead || rec.out == outBalance
	}
	for _, rec := range recs {
		if !checked(rec) {
			continue
		}
		switch in := rec.in.(type) {
		case Deposit:
			walletNode(in.Wallet)
		case Read:
			walletNode(in.Wallet)
		case Transfer:
			a, b := find(walletNode(in.From)), find(walletNode(in.To))
			parent[a] = b
		}
	}

	byRoot := map[int]*partition{}
	var parts []*partition
	for w, n := range node {
		root := find(n)
		p := byRoot[root]
		if p == nil {
			p = &partition{}
			byRoot[root] = p
			parts = append(parts, p)
		}
		p.names = append(p.names, w)
	}
	local := map[string]int{}
	for _, p := range parts {
		slices.Sort(p.names)
		p.start = make(balances, len(p.names))
		for i, w := range p.names {
			local[w] = i
			p.start[i] = initial[w]
		}
	}
	for id, rec := range recs {
		if !checked(rec) {
			continue
		}
		o := op{id: id, client: rec.client, call: rec.call, ret: rec.ret}
		var first string
		switch in := rec.in.(type) {
		case Deposit:
			first, o.c = in.Wallet, call{kind: kindDeposit, a: local[in.Wallet], cents: in.Cents}
		case Transfer:
			first, o.c = in.From, call{kind: kindTransfer, a: local[in.From], b: local[in.To], cents: in.Cents}
		case Read:
			first, o.c = in.Wallet, call{kind: kindRead, a: local[in.Wallet]}
		}
		o.a = answer{out: rec.out, balance: rec.balance}
		if rec.out == outPending {
			o.a.out = outUnknown
		}
		p := byRoot[find(node[first])]
		p.ops = append(p.ops, o)
	}
	// Report the partition whose trouble started first; map order is random.
	slices.SortFunc(parts, func(x, y *partition) int { return cmp.Compare(x.ops[0].id, y.ops[0].id) })
	return parts
}

// operations is the history as porcupine takes it. An unknown write returns at
// infinity in the history, but porcupine gets the interval [call, call]: the
// model puts it among the pending writes where it is linearized, and from
// there it may take effect at any later moment or never, so linearizing it at
// its call already allows everything a later point would. Left at infinity,
// porcupine would also try every later point for every unknown write, which
// multiplies the orders it must exhaust to prove a history illegal.
func operations(ops []op) []porcupine.Operation {
	out := make([]porcupine.Operation, len(ops))
	for i, o := range ops {
		ret := o.ret
		if o.a.out == outUnknown {
			ret = o.call
		}
		out[i] = porcupine.Operation{ClientId: o.client, Input: o.c, Call: o.call, Output: o.a, Return: ret}
	}
	return out
}

// checkAll checks every partition, as many at once as there are CPUs, all
// against one deadline (zero: none), so the timeout bounds the whole check.
func checkAll(parts []*partition, deadline time.Time) ([]porcupine.CheckResult, []bool) {
	results := make([]porcupine.CheckResult, len(parts))
	bounded := make([]bool, len(parts))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var timeout time.Duration
			if !deadline.IsZero() {
				if timeout = time.Until(deadline); timeout <= 0 {
					results[i] = porcupine.Unknown
					return
				}
			}
			results[i], bounded[i] = checkPartition(p.names, p.start, p.ops, timeout)
		})
	}
	wg.Wait()
	return results, bounded
}

// checkPartition runs porcupine on ops. A run in which the model reached its
// bounds explored only some orders: a linearization it found is real, but it
// cannot prove there is none, so Illegal becomes Unknown, with bounded set.
func checkPartition(names []string, start balances, ops []op, timeout time.Duration) (res porcupine.CheckResult, bounded bool) {
	m, model := newModel(names, start)
	res = porcupine.CheckOperationsTimeout(model, operations(ops), timeout)
	if res == porcupine.Illegal && m.exhausted.Load() {
		return porcupine.Unknown, true
	}
	return res, false
}

// visualize writes porcupine's HTML view of the partition, with the partial
// linearizations that show where every order got stuck.
func visualize(p *partition, dir string, timeout time.Duration) (string, error) {
	_, model := newModel(p.names, p.start)
	_, info := porcupine.CheckOperationsVerbose(model, operations(p.ops), timeout)
	f, err := os.CreateTemp(dir, "paysvc-history-*.html")
	if err != nil {
		return "", err
	}
	if err := porcupine.Visualize(model, info, f); err != nil {
		f.Close()
		return f.Name(), err
	}
	return f.Name(), f.Close()
}
