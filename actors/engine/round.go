package engine

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/invoice"
	"paysvc/actors/wallet"
	"paysvc/storage"
	"paysvc/topics"
)

// round is one poll's records on their way into their partitions' open batches,
// with every read they need taken before any partition's lock is held for the
// apply: the poll's dedupe read (pollReads) and the hydration of the invoices and
// wallets its commands name that no actor holds.
//
// Why: the poll loop seals the open batches as soon as the commit in flight ends,
// but not while a round is applying into them. When every read of a round ran
// under the partitions' locks, a commit that ended during a round's reads waited
// for the reads and the apply: under STK load 1.7 ms after each commit, in a 9.3
// ms cycle (docs/benchmarks.md). With the reads taken first the loop
// seals while they run (Run), and the round applies into the next batch.
//
// A preloaded snapshot is as good at the apply as when it was read: it was read
// only for an aggregate no actor held (startRound), which no uncommitted batch has
// touched, and nothing but the round's own apply spawns an actor for it in between
// (the poll loop is the only one that applies). An aggregate an actor held then
// and has lost since (released at a commit, or a reset) was not preloaded, and is
// read under the lock as before (hydrate).
type round struct {
	reads *pollReads
	parts map[int32]*roundPart
	// ready is closed once every read has answered: the hydration reads and the
	// dedupe read.
	ready    chan struct{}
	invoices preloaded[invoice.State]
	wallets  preloaded[wallet.State]
}

// roundPart is one partition's share of a round.
type roundPart struct {
	w        *work
	payloads map[*kgo.Record]any // decoded once, in parallel with other partitions
	// seeks is the partition's seek count when the round read for it: records
	// fetched before a seek since are stale copies (Engine.current), and process
	// drops them.
	seeks int64
}

// payload is the record's payload as the round decoded it (ok false: not decoded).
func (rp *roundPart) payload(r *kgo.Record) (v any, ok bool) {
	if rp == nil {
		return nil, false
	}
	v, ok = rp.payloads[r]
	return v, ok
}

// preloaded is a round's hydration read of one kind: the (merchant, id) pairs
// asked for, and the snapshots found by id.
type preloaded[S any] struct {
	asked map[[2]string]bool
	found map[string]S
	err   error
}

// split parts want into what the round read (found: the snapshots of the ids
// that existed, each for the merchant that asked; one not found did not exist when
// read, a new id) and the rest, which the caller reads itself. A nil preload, or
// one whose read failed, read nothing.
func (pl *preloaded[S]) split(want storage.Owned, owner func(S) string) (found []S, rest storage.Owned) {
	if pl == nil || pl.err != nil || len(pl.asked) == 0 {
		return nil, want
	}
	for i, id := range want.IDs {
		m := want.Merchants[i]
		if !pl.asked[[2]string{m, id}] {
			rest.Add(m, id)
			continue
		}
		// The query joined each id to its merchant; an id asked for by two merchants
		// is found once, for its owner only.
		if s, ok := pl.found[id]; ok && owner(s) == m {
			found = append(found, s)
		}
	}
	return found, rest
}

func invoiceOwner(s invoice.State) string { return s.MerchantID }
func walletOwner(s wallet.State) string   { return s.MerchantID }

// startRound decodes the records' payloads and starts every read their apply
// needs: the dedupe read and one hydration query per kind for all partitions.
// ready is closed once they have answered; applyRound waits for it.
func (e *Engine) startRound(ctx context.Context, byPart map[int32]*work) *round {
	var all [][]*kgo.Record
	for _, w := range byPart {
		all = append(all, w.recs)
	}
	rd := &round{reads: e.readPoll(ctx, all), parts: map[int32]*roundPart{}, ready: make(chan struct{})}
	var mu sync.Mutex
	var inv, wal storage.Owned
	var wg sync.WaitGroup
	for part, w := range byPart {
		p := e.partition(part)
		if p == nil {
			continue
		}
		rp := &roundPart{w: w, payloads: make(map[*kgo.Record]any, len(w.recs))}
		rd.parts[part] = rp
		e.workers.run(&wg, func() {
			cmds := make([]*topics.Command, 0, len(w.recs))
			payloads := make([]any, 0, len(w.recs))
			for _, r := range w.recs {
				c, err := rd.reads.command(r)
				if err != nil {
					continue
				}
				v := e.decodePayload(c)
				rp.payloads[r] = v
				cmds, payloads = append(cmds, c), append(payloads, v)
			}
			p.mu.Lock()
			rp.seeks = p.seeks
			var wantInv, wantWal storage.Owned
			if !p.dropped {
				done := p.knownApplied(cmds)
				wantInv = missingIDs(p, cmds, payloads, done, invoiceIDs, p.invoices, false)
				wantWal = missingIDs(p, cmds, payloads, done, walletIDs, p.wallets, false)
			}
			p.mu.Unlock()
			mu.Lock()
			inv.Merchants, inv.IDs = append(inv.Merchants, wantInv.Merchants...), append(inv.IDs, wantInv.IDs...)
			wal.Merchants, wal.IDs = append(wal.Merchants, wantWal.Merchants...), append(wal.IDs, wantWal.IDs...)
			mu.Unlock()
		})
	}
	wg.Wait()
	rd.invoices.asked, rd.wallets.asked = askedSet(inv), askedSet(wal)
	if len(inv.IDs) == 0 && len(wal.IDs) == 0 {
		if rd.reads.ready == nil {
			close(rd.ready) // nothing to read at all
			return rd
		}
		go func() {
			rd.reads.wait()
			close(rd.ready)
		}()
		return rd
	}
	var reads sync.WaitGroup
	if len(inv.IDs) > 0 {
		reads.Go(func() { rd.invoices.found, rd.invoices.err = storage.LoadOwnedInvoices(ctx, e.db, inv) })
	}
	if len(wal.IDs) > 0 {
		reads.Go(func() { rd.wallets.found, rd.wallets.err = storage.LoadOwnedWallets(ctx, e.db, wal) })
	}
	go func() {
		start := time.Now()
		reads.Wait()
		hydrationReads.Observe(time.Since(start).Seconds())
		rd.reads.wait()
		close(rd.ready)
	}()
	return rd
}

func askedSet(o storage.Owned) map[[2]string]bool {
	m := make(map[[2]string]bool, len(o.IDs))
	for i, id := range o.IDs {
		m[[2]string{o.Merchants[i], id}] = true
	}
	return m
}

// applyRound applies a started round's records into their partitions' open
// batches, the partitions in parallel. With early set (a commit is in flight) it
// returns the records a partition did not take (process), for the caller to hold.
func (e *Engine) applyRound(ctx context.Context, rd *round, at time.Time, early bool) map[int32]*work {
	<-rd.ready
	var wg sync.WaitGroup
	var mu sync.Mutex
	back := map[int32]*work{}
	for part, rp := range rd.parts {
		p := e.partition(part)
		if p == nil {
			continue
		}
		e.workers.run(&wg, func() {
			if applied, seeks := e.process(ctx, p, rp, rd, at, early); !applied {
				mu.Lock()
				back[part] = &work{recs: rp.w.recs, hw: rp.w.hw, seeks: seeks}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return back
}

// knownApplied names the commands this partition applied that the table may not
// show yet (uncommitted, recent): hydration skips what they need. Called with p.mu
// held.
func (p *partition) knownApplied(cmds []*topics.Command) map[string][]byte {
	known := map[string][]byte{}
	for _, c := range cmds {
		if c == nil {
			continue
		}
		_, ok := p.uncommitted[c.ID]
		if !ok {
			_, ok = p.recent[c.ID]
		}
		if ok {
			known[c.ID] = nil
		}
	}
	return known
}
