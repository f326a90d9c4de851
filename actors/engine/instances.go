package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/anthdm/hollywood/actor"

	"paysvc/actors/engine/aggregate"
	"paysvc/storage"
	"paysvc/topics"
)

// An instance is one aggregate the partition holds in memory: a hollywood actor of
// the one shell (actors/engine/aggregate), spawned when a command first needs it
// (hydrate) and stopped when idle (passivate), when final (releaseFinal) or when
// the partition is reset (resetActors). Spawning, asking, indexing and stopping
// are written here once for every kind.
type instance struct {
	kind     *Kind
	merchant string
	id       string
	pid      *actor.PID
	// state is what the actor last answered: the partition is the only sender and
	// waits for every answer, so it is the actor's state between messages.
	state any
	// version is the stored version (kinds writing through the generic rows).
	version  int64
	lastUsed time.Time
	// batch is the partition's open batch (partition.applying) when the instance
	// was last used: releaseFinal stops it only if no later batch has used it.
	batch uint64
	// keys are the instance's Index keys, as the partition's index holds them.
	keys []string
}

// InstanceKey is how instances are keyed: by merchant, so one merchant's command
// never reaches another's instance (LoadOwned's map uses it too).
func InstanceKey(merchant, id string) string { return merchant + "\x00" + id }

func instKey(merchant, id string) string { return InstanceKey(merchant, id) }

func indexKey(kind, merchant, key string) string { return kind + "\x00" + merchant + "\x00" + key }

// errNotHydrated is a handler reaching an instance no Ref of its command named: a
// programming error, which fails the command alone (it is set aside, never
// answered as if the instance did not exist).
var errNotHydrated = errors.New("engine: instance not hydrated: its kind must name it in IDs, Needs or Refs")

// instanceOf is the live instance of kind, or nil.
func (p *partition) instanceOf(kind, merchant, id string) *instance {
	return p.inst[kind][instKey(merchant, id)]
}

// spawn starts an instance's actor from its state.
func (e *Engine) spawn(p *partition, k *Kind, merchant, id string, state any, version int64) *instance {
	hid := fmt.Sprintf("%s.p%d.e%d.g%d", id, p.id, p.epoch, p.gen)
	in := &instance{kind: k, merchant: merchant, id: id, state: state, version: version, lastUsed: time.Now(), batch: p.applying,
		pid: e.actors.Spawn(k.Actor(state), k.Name, actor.WithID(hid), actor.WithInboxSize(16))}
	m := p.inst[k.Name]
	if m == nil {
		m = map[string]*instance{}
		p.inst[k.Name] = m
	}
	m[instKey(merchant, id)] = in
	e.reindex(p, in)
	e.live.Add(1)
	liveActors.Set(float64(e.live.Load()))
	return in
}

// drop stops an instance's actor and forgets it. Poison is asynchronous: until the
// old process has left hollywood's registry, a spawn under the same id is refused
// and its pid names the dying actor, so the generation moves on and the next
// spawn gets a fresh id.
func (e *Engine) drop(p *partition, in *instance) {
	e.actors.Poison(in.pid)
	delete(p.inst[in.kind.Name], instKey(in.merchant, in.id))
	for _, k := range in.keys {
		delete(p.index, indexKey(in.kind.Name, in.merchant, k))
	}
	p.gen++
	e.live.Add(-1)
}

// reindex keeps the partition's index of the instance's keys.
func (e *Engine) reindex(p *partition, in *instance) {
	if in.kind.Index == nil {
		return
	}
	keys := in.kind.Index(in.state)
	if slices.Equal(keys, in.keys) {
		return
	}
	for _, k := range in.keys {
		delete(p.index, indexKey(in.kind.Name, in.merchant, k))
	}
	for _, k := range keys {
		p.index[indexKey(in.kind.Name, in.merchant, k)] = in.id
	}
	in.keys = keys
}

// ask sends one message to an instance's actor and waits for the answer with our
// correlation id (a late answer to an earlier, abandoned ask is skipped). At most
// one message per actor is ever in flight, so mailboxes stay bounded.
func (e *Engine) ask(p *partition, in *instance, build func(corr uint64, reply chan<- aggregate.Response) any) (aggregate.Response, error) {
	corr := e.corr.Add(1)
	in.lastUsed, in.batch = time.Now(), p.applying
	e.actors.Send(in.pid, build(corr, p.replyCh))
	timer := time.NewTimer(e.cfg.ActorTimeout)
	defer timer.Stop()
	for {
		select {
		case r := <-p.replyCh:
			if r.CorrID != corr {
				continue
			}
			in.state = r.After
			e.reindex(p, in)
			return r, nil
		case <-timer.C:
			return aggregate.Response{}, errActorTimeout
		}
	}
}

// restore puts an instance's earlier state back.
func (e *Engine) restore(p *partition, in *instance, s any) error {
	_, err := e.ask(p, in, func(corr uint64, reply chan<- aggregate.Response) any {
		return aggregate.Restore{CorrID: corr, State: s, Reply: reply}
	})
	return err
}

// resetActors throws away the partition's instances; they rehydrate from Postgres
// on next use. Called with p.mu held.
func (e *Engine) resetActors(p *partition) {
	for _, m := range p.inst {
		for _, in := range m {
			e.drop(p, in)
		}
	}
	clear(p.index)
	p.gen++
	liveActors.Set(float64(e.live.Load()))
}

// releaseFinal stops the instances a committed batch made final (a collection
// that completed or failed, a finished file), as soon as it committed: hardly any
// command comes for them again (a late or repeated result, a clearing), and one
// that does rehydrates the instance from its snapshot. Left to passivation, every
// collection's actor stayed live for PAYSVC_ENGINE_IDLE_AFTER: at 2,500
// collections/s that is ~300,000 actors, most of the heap the collector marks
// (docs/benchmarks-history.md). An instance a later batch has used since (its batch number
// is higher) holds state not committed yet and is left alone. Called by settle,
// with p.mu held.
func (e *Engine) releaseFinal(p *partition, ic *inflightCommit) {
	n := 0
	for _, f := range ic.final {
		in := p.inst[f[0]][f[1]]
		if in == nil || in.batch > ic.batch {
			continue
		}
		e.drop(p, in)
		n++
	}
	if n == 0 {
		return
	}
	liveActors.Set(float64(e.live.Load()))
	finalReleased.Add(float64(n))
}

// passivate stops and forgets the instances not used since idleSince, so the
// memory of an engine follows its active aggregates, not every one that ever had
// a command: a forgotten instance is rehydrated from its snapshot by its next
// command (hydrate). An instance must never be dropped while a batch that touched
// it is uncommitted, since its snapshot row would then be older than the state
// the batch replied with; so the commit in flight, if any, is waited for first (a
// few milliseconds, once per sweep). Skipping busy partitions instead would never
// passivate anything under sustained load, when a commit is almost always in
// flight. Called from the poll loop, so no batch is being applied meanwhile.
func (e *Engine) passivate(ctx context.Context, idleSince time.Time) {
	before := e.live.Load()
	for _, p := range e.owned() {
		p.mu.Lock()
		if p.dropped || !e.settle(ctx, p, true) {
			// A failed commit has reset the partition: its instances are gone already.
			p.mu.Unlock()
			continue
		}
		for _, m := range p.inst {
			for _, in := range m {
				if in.lastUsed.Before(idleSince) {
					e.drop(p, in)
				}
			}
		}
		p.mu.Unlock()
	}
	liveActors.Set(float64(e.live.Load()))
	// Only the poll loop runs sweeps, so passivated needs no lock.
	if e.passivated += before - e.live.Load(); e.passivated >= releaseAfterPassivating {
		e.releaseMemory(e.passivated)
		e.passivated = 0
	}
}

// wanted is a Ref of a command's (or an instance's) merchant.
type wanted struct {
	merchant string
	Ref
}

// hydrate makes live every instance the batch's commands need that the partition
// does not hold: those they name (IDs, Needs), by id or by key, and those these
// refer to (Refs), level by level. A kind with LoadOwned is read in one query for
// every merchant (or taken from the round's preload); the others per merchant.
// What was asked for is remembered for the batch: an instance asked for and not
// found does not exist (Tx answers not found), one never asked for is a
// programming error (errNotHydrated). Then each kind's Prepare reads its
// commands' facts. A command known to be applied already (done) needs nothing.
// Called with p.mu held, before any command of the batch applies: no command
// reads the database while it applies.
func (e *Engine) hydrate(ctx context.Context, p *partition, cmds []*topics.Command, payloads []any, done map[string][]byte, rd *round) (facts map[string]map[string]any, err error) {
	p.asked = map[string]bool{}
	var want []wanted
	for i, c := range cmds {
		if c == nil {
			continue
		}
		if _, applied := done[c.ID]; applied { // presence, not the value: a trimmed reply is empty
			continue
		}
		for _, r := range e.refsOf(c, payloads[i]) {
			want = append(want, wanted{c.MerchantID, r})
		}
	}
	visited := map[*instance]bool{}
	for level := 0; len(want) > 0; level++ {
		if level > 8 {
			return nil, errors.New("engine: instances refer to each other too deep")
		}
		found, err := e.load(ctx, p, want, rd)
		if err != nil {
			return nil, err
		}
		rd = nil // the preload answered the commands' own refs only
		want = want[:0]
		for _, in := range found {
			if visited[in] {
				continue
			}
			visited[in] = true
			in.lastUsed, in.batch = time.Now(), p.applying
			if in.kind.Refs != nil {
				for _, r := range in.kind.Refs(in.state) {
					want = append(want, wanted{in.merchant, r})
				}
			}
		}
	}
	liveActors.Set(float64(e.live.Load()))
	if facts, err = e.readTaken(ctx, cmds, payloads, done); err != nil {
		return nil, err
	}
	for i, c := range cmds {
		if c == nil || payloads[i] == nil {
			continue
		}
		k := e.kinds.byCmd[c.Type]
		if k == nil || k.Prepare == nil {
			continue
		}
		if _, applied := done[c.ID]; applied {
			continue
		}
		find := func(kind, id string) (any, bool) {
			if in := p.instanceOf(kind, c.MerchantID, id); in != nil {
				return in.state, true
			}
			return nil, false
		}
		fs, err := k.Prepare(ctx, e.db, find, c, payloads[i])
		if err != nil {
			return nil, fmt.Errorf("prepare %s: %w", c.Type, err)
		}
		if facts == nil {
			facts = map[string]map[string]any{}
		}
		fk := k.Name + "\x00" + c.MerchantID
		if facts[fk] == nil {
			facts[fk] = map[string]any{}
		}
		for key, v := range fs {
			facts[fk][key] = v
		}
	}
	return facts, nil
}

// takenFact is the fact key under which readTaken records, for a command's kind
// and merchant, that another merchant holds an id (Tx.TakenElsewhere).
const takenFact = "\x00taken\x00"

// readTaken asks each kind with Taken, once, which of the ids its commands of the
// batch open (Creates) belong to another merchant, and records them as facts of the
// command's kind and merchant.
func (e *Engine) readTaken(ctx context.Context, cmds []*topics.Command, payloads []any, done map[string][]byte) (map[string]map[string]any, error) {
	want := map[*Kind]*storage.Owned{}
	var order []*Kind
	for i, c := range cmds {
		if c == nil || payloads[i] == nil {
			continue
		}
		k := e.kinds.byCmd[c.Type]
		if k == nil || k.Taken == nil {
			continue
		}
		if _, applied := done[c.ID]; applied {
			continue
		}
		o := want[k]
		if o == nil {
			o = &storage.Owned{}
			want[k] = o
			order = append(order, k)
		}
		for _, id := range k.Creates(c.Type, payloads[i]) {
			o.Add(c.MerchantID, id)
		}
	}
	var facts map[string]map[string]any
	for _, k := range order {
		if len(want[k].IDs) == 0 {
			continue
		}
		taken, err := k.Taken(ctx, e.db, *want[k])
		if err != nil {
			return nil, fmt.Errorf("taken ids of %s: %w", k.Name, err)
		}
		o := want[k]
		for i, id := range o.IDs {
			if !taken[InstanceKey(o.Merchants[i], id)] {
				continue
			}
			if facts == nil {
				facts = map[string]map[string]any{}
			}
			fk := k.Name + "\x00" + o.Merchants[i]
			if facts[fk] == nil {
				facts[fk] = map[string]any{}
			}
			facts[fk][takenFact+id] = true
		}
	}
	return facts, nil
}

// load makes live what want names that is not, and returns every instance want
// found (live already or loaded).
func (e *Engine) load(ctx context.Context, p *partition, want []wanted, rd *round) ([]*instance, error) {
	var out []*instance
	type perKind struct {
		ids  storage.Owned
		keys map[string][]string // merchant -> keys
	}
	missing := map[string]*perKind{}
	seen := map[string]bool{}
	for _, w := range want {
		k := e.kinds.byName[w.Kind]
		if k == nil {
			return nil, fmt.Errorf("engine: a command needs an instance of %q, which is not registered", w.Kind)
		}
		if w.Key != "" {
			p.asked[indexKey(k.Name, w.merchant, "key:"+w.Key)] = true
			if id, ok := p.index[indexKey(k.Name, w.merchant, w.Key)]; ok {
				if in := p.instanceOf(k.Name, w.merchant, id); in != nil {
					out = append(out, in)
					continue
				}
			}
		} else {
			p.asked[indexKey(k.Name, w.merchant, w.ID)] = true
			if in := p.instanceOf(k.Name, w.merchant, w.ID); in != nil {
				out = append(out, in)
				continue
			}
		}
		sk := indexKey(k.Name, w.merchant, w.ID+"\x00"+w.Key)
		if seen[sk] {
			continue
		}
		seen[sk] = true
		pk := missing[k.Name]
		if pk == nil {
			pk = &perKind{keys: map[string][]string{}}
			missing[k.Name] = pk
		}
		if w.Key != "" {
			pk.keys[w.merchant] = append(pk.keys[w.merchant], w.Key)
		} else {
			pk.ids.Add(w.merchant, w.ID)
		}
	}
	for _, k := range e.kinds.list {
		pk := missing[k.Name]
		if pk == nil {
			continue
		}
		adopt := func(merchant string, s Snapshot) {
			in := p.instanceOf(k.Name, merchant, s.ID)
			if in == nil {
				in = e.spawn(p, k, merchant, s.ID, s.State, s.Version)
			}
			out = append(out, in)
		}
		if len(pk.ids.IDs) > 0 {
			var pre *preloaded
			if rd != nil {
				pre = rd.preloads[k.Name]
			}
			found, rest := pre.split(pk.ids)
			for _, f := range found {
				adopt(f.merchant, f.snap)
			}
			if len(rest.IDs) > 0 {
				if k.LoadOwned != nil {
					more, err := k.LoadOwned(ctx, e.db, rest)
					if err != nil {
						return nil, fmt.Errorf("load %s: %w", k.Name, err)
					}
					for i, id := range rest.IDs {
						if s, ok := more[instKey(rest.Merchants[i], id)]; ok {
							adopt(rest.Merchants[i], s)
						}
					}
				} else {
					byMerchant := map[string][]string{}
					for i, m := range rest.Merchants {
						byMerchant[m] = append(byMerchant[m], rest.IDs[i])
					}
					for m, list := range byMerchant {
						snaps, err := k.Load(ctx, e.db, m, list)
						if err != nil {
							return nil, fmt.Errorf("load %s: %w", k.Name, err)
						}
						for _, s := range snaps {
							adopt(m, s)
						}
					}
				}
			}
		}
		for m, keys := range pk.keys {
			snaps, err := k.LoadKeys(ctx, e.db, m, keys)
			if err != nil {
				return nil, fmt.Errorf("load %s by key: %w", k.Name, err)
			}
			for _, s := range snaps {
				adopt(m, s)
			}
		}
	}
	return out, nil
}
