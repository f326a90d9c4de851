package engine

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/storage"
	"paysvc/topics"
)

// round is one poll's records on their way into their partitions' open batches,
// with every read they need taken before any partition's lock is held for the
// apply: the poll's dedupe read (pollReads) and the hydration of the instances its
// commands name that no actor holds, for every kind that loads several merchants'
// instances in one query (Kind.LoadOwned).
//
// Why: the poll loop seals the open batches as soon as the commit in flight ends,
// but not while a round is applying into them. When every read of a round ran
// under the partitions' locks, a commit that ended during a round's reads waited
// for the reads and the apply: under STK load 1.7 ms after each commit, in a 9.3
// ms cycle (docs/benchmarks-history.md). With the reads taken first the loop
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
	ready chan struct{}
	// preloads are the hydration reads, by kind.
	preloads map[string]*preloaded
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

// preloaded is a round's hydration read of one kind: the (merchant, id) pairs asked
// for, and the snapshots found, by InstanceKey.
type preloaded struct {
	asked map[string]bool
	found map[string]Snapshot
	err   error
}

// preFound is a preloaded snapshot with the merchant that asked for it.
type preFound struct {
	merchant string
	snap     Snapshot
}

// split parts want into what the round read (found: the snapshots of the ids that
// existed, each for the merchant that asked; one not found did not exist when
// read, a new id) and the rest, which the caller reads itself. A nil preload, or
// one whose read failed, read nothing.
func (pl *preloaded) split(want storage.Owned) (found []preFound, rest storage.Owned) {
	if pl == nil || pl.err != nil || len(pl.asked) == 0 {
		return nil, want
	}
	for i, id := range want.IDs {
		m := want.Merchants[i]
		key := instKey(m, id)
		if !pl.asked[key] {
			rest.Add(m, id)
			continue
		}
		// The query joined each id to its merchant: an id asked for by two
		// merchants is found once, for its owner only.
		if s, ok := pl.found[key]; ok {
			found = append(found, preFound{merchant: m, snap: s})
		}
	}
	return found, rest
}

// startRound decodes the records' payloads and starts every read their apply
// needs: the dedupe read and one hydration query per kind for all partitions.
// ready is closed once they have answered; applyRound waits for it.
func (e *Engine) startRound(ctx context.Context, byPart map[int32]*work) *round {
	var all [][]*kgo.Record
	for _, w := range byPart {
		all = append(all, w.recs)
	}
	rd := &round{reads: e.readPoll(ctx, all), parts: map[int32]*roundPart{}, ready: make(chan struct{}), preloads: map[string]*preloaded{}}
	var mu sync.Mutex
	want := map[string]*storage.Owned{}
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
			mine := map[string]*storage.Owned{}
			if !p.dropped {
				done := p.knownApplied(cmds)
				for i, c := range cmds {
					if _, applied := done[c.ID]; applied {
						continue
					}
					for _, r := range e.refsOf(c, payloads[i]) {
						k := e.kinds.byName[r.Kind]
						if r.Key != "" || k == nil || k.LoadOwned == nil || p.instanceOf(r.Kind, c.MerchantID, r.ID) != nil {
							continue
						}
						if mine[r.Kind] == nil {
							mine[r.Kind] = &storage.Owned{}
						}
						mine[r.Kind].Add(c.MerchantID, r.ID)
					}
				}
			}
			p.mu.Unlock()
			mu.Lock()
			for kind, o := range mine {
				if want[kind] == nil {
					want[kind] = &storage.Owned{}
				}
				want[kind].Merchants, want[kind].IDs = append(want[kind].Merchants, o.Merchants...), append(want[kind].IDs, o.IDs...)
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(want) == 0 {
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
	for kind, o := range want {
		k, pl := e.kinds.byName[kind], &preloaded{asked: askedSet(*o)}
		rd.preloads[kind] = pl
		reads.Go(func() { pl.found, pl.err = k.LoadOwned(ctx, e.db, *o) })
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

func askedSet(o storage.Owned) map[string]bool {
	m := make(map[string]bool, len(o.IDs))
	for i, id := range o.IDs {
		m[instKey(o.Merchants[i], id)] = true
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
