package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/lib/pq"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/engine/aggregate"
	"paysvc/actors/engine/replies"
	"paysvc/storage"
	"paysvc/topics"
)

// errActorTimeout fails the batch: an actor that does not answer cannot be trusted
// to hold the state the batch would commit.
var errActorTimeout = errors.New("engine: actor did not answer in time")

// partition is the worker state of one owned command partition.
//
// Commits are pipelined one deep: while batch K commits, batch K+1 is applied
// through the actors (on top of K's uncommitted state), and K+1's commit starts
// only once K's has succeeded. If K fails, K+1 is thrown away with it: the actors
// are reset and the consumer goes back to the last committed offset.
type partition struct {
	mu        sync.Mutex
	id        int32
	epoch     int64
	committed int64 // stored offset: every command below it is committed
	next      int64 // offset of the next command to apply (>= committed)
	seekedTo  int64 // offset last sought to after a gap, -1 if none
	seeks     int64 // how many times the consumer was sought back (records fetched before are stale)
	dropped   bool
	failures  int // consecutive failed commits, for backoff
	gen       int // bumps on every reset so new actors get fresh hollywood ids
	// inst are the live instances of every kind: kind -> merchant\x00id.
	inst map[string]map[string]*instance
	// index finds live instances by their kind's Index keys: kind\x00merchant\x00key -> id.
	index map[string]string
	// asked names what the batch being applied asked hydration for (hydrate):
	// kind\x00merchant\x00id, or kind\x00merchant\x00key:<key>.
	asked    map[string]bool
	replyCh  chan aggregate.Response
	inflight *inflightCommit
	// open is the next batch, applied while inflight commits (nil if none).
	open *openBatch
	// applying numbers the open batch: seal gives the number to its in-flight
	// commit and moves on to the next.
	applying    uint64
	uncommitted map[string]topics.Reply // replies of commands applied but not yet committed
	// recent are replies of commits settled since the poll's dedupe read may have
	// been taken (pollReads): that read may not show them, and uncommitted no
	// longer does. process empties it once its batch is applied.
	recent map[string]topics.Reply
	// Isolation of a permanent failure (quarantine.go): while suspectEnd >= 0, a
	// batch takes at most limit records and stops before suspectEnd. poison >= 0 is
	// the offset of a command found to fail on its own, to be quarantined.
	suspectEnd int64
	limit      int
	poison     int64
	poisonErr  error
}

// inflightCommit is a batch whose commit is running.
type inflightCommit struct {
	done  chan struct{}
	err   error
	batch uint64      // the batch's number (partition.applying when it was sealed)
	final [][2]string // instances the batch made final (releaseFinal): kind, key
	first int64       // offset of the batch's first record
	count int         // records in the batch
	next  int64
	ids   []string
}

func newPartition(id int32, epoch, next int64) *partition {
	return &partition{id: id, epoch: epoch, committed: next, next: next, seekedTo: -1, suspectEnd: -1, poison: -1,
		inst: map[string]map[string]*instance{}, index: map[string]string{}, replyCh: make(chan aggregate.Response, 16),
		uncommitted: map[string]topics.Reply{}, recent: map[string]topics.Reply{}}
}

// pending is a partition's applied batch, made its in-flight commit, that the poll
// loop commits together with the other partitions' (commitGroup).
type pending struct {
	p   *partition
	pr  *prepared
	ic  *inflightCommit
	lag float64
}

// process applies one partition's records of a round into its open batch (made
// with time at if there is none). Records below the applied offset were applied
// already. With early set, the poll loop is gathering while a commit is in flight:
// a partition that is isolating a failure (quarantine.go) then applies nothing and
// process returns false, so the caller holds the records for the batch's end, when
// they are cut to the isolation's limit as one batch; seeks then tags them with
// the partition's seek count, so that the caller drops them if the partition is
// sought back before they are applied (they would come again from the consumer,
// and applying these copies would skip what lies between: Engine.current).
// Otherwise it returns true: the records were applied, or dropped because the
// partition went back to its committed offset (they come again from the consumer).
func (e *Engine) process(ctx context.Context, p *partition, rp *roundPart, rd *round, at time.Time, early bool) (applied bool, seeks int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	applied = e.processLocked(ctx, p, rp, rd, at, early)
	return applied, p.seeks // read after it: Go does not order a field read against a call in one assignment
}

func (e *Engine) processLocked(ctx context.Context, p *partition, rp *roundPart, rd *round, at time.Time, early bool) bool {
	// Replies settled before this batch's dedupe read was taken are in that read
	// (or in a later one); those settled since are still in recent until now.
	defer clear(p.recent)
	if p.dropped || !e.settle(ctx, p, false) {
		return true
	}
	if p.seeks != rp.seeks {
		// Sought back while the round read (a failed commit, settled by the seal
		// that ran meanwhile): these are stale copies, and come again.
		return true
	}
	if early && (p.isolating() || p.poison >= 0) {
		return false
	}
	recs := rp.w.recs
	todo := recs[:0:0]
	for _, r := range recs {
		if r.Offset >= p.next {
			todo = append(todo, r)
		}
	}
	if len(todo) == 0 {
		return true
	}
	if todo[0].Offset > p.next {
		if p.seekedTo != p.next {
			// Records we did not commit were skipped (a failed batch): go back.
			e.seek(p)
			return true
		}
		// We went back and the log still starts later: records were removed by
		// retention. Nothing can be done but to say so loudly and go on.
		e.log.Error("command log gap: records below the first available offset are gone",
			"partition", p.id, "stored_offset", p.next, "first_available", todo[0].Offset)
	}
	if p.poison >= 0 && todo[0].Offset > p.poison {
		p.poison, p.poisonErr = -1, nil // gone from the log (retention): nothing to set aside
	}
	if p.poison >= 0 && todo[0].Offset == p.poison {
		if !e.settle(ctx, p, true) || !e.quarantine(ctx, p, todo[0]) {
			return true
		}
		p.seekedTo = -1
		if todo = todo[1:]; len(todo) == 0 {
			return true
		}
	}
	cut := false
	if p.isolating() {
		if p.next >= p.suspectEnd {
			p.suspectEnd, p.limit = -1, 0 // the suspect range is behind us
		} else {
			n := 0
			for n < len(todo) && n < p.limit && todo[n].Offset < p.suspectEnd {
				n++
			}
			cut, todo = n < len(todo), todo[:n]
		}
	}
	ob := p.open
	if ob == nil {
		ob = newOpenBatch(at, todo[0].Offset)
	}
	if err := e.applyBatch(ctx, p, ob, todo, rd, rp); err != nil {
		// Wait for the commit in flight first: if it failed too, settle has already
		// reset the partition (and thrown the open batch away).
		if e.settle(ctx, p, true) {
			e.failed(ctx, p, err, ob.first, todo[len(todo)-1].Offset+1, ob.count+len(todo))
		}
		return true
	}
	if early {
		appliesDuringCommit.Inc()
		cmdsDuringCommit.Add(float64(len(todo)))
	} else {
		appliesAfterCommit.Inc()
		cmdsAfterCommit.Add(float64(len(todo)))
	}
	p.open = ob
	ob.hw = rp.w.hw
	p.seekedTo = -1
	p.next = ob.next
	if cut {
		// The rest of the poll comes again from the consumer, after this batch.
		e.seek(p)
	}
	return true
}

// seal ends the partition's open batch and makes it the in-flight commit, once the
// commit before it has succeeded (a partition's batches commit in order). It
// returns nil if there is nothing to commit, or if that commit failed: the open
// batch, applied on top of it, went with it. The caller must start the returned
// batch's commit (commitGroup), which closes ic.done.
func (e *Engine) seal(ctx context.Context, p *partition) *pending {
	p.mu.Lock()
	defer p.mu.Unlock()
	ob := p.open
	if ob == nil || p.dropped {
		return nil
	}
	if !e.settle(ctx, p, true) {
		return nil
	}
	p.open = nil
	pr := ob.prepared(p)
	for id, r := range pr.replies {
		p.uncommitted[id] = r
	}
	ic := &inflightCommit{done: make(chan struct{}), next: ob.next, first: ob.first, count: ob.count}
	for id := range pr.replies {
		ic.ids = append(ic.ids, id)
	}
	ic.batch, ic.final = p.applying, pr.final
	p.applying++
	p.inflight = ic
	applyRounds.Observe(float64(ob.applies))
	return &pending{p: p, pr: pr, ic: ic, lag: float64(max(ob.hw-ob.next, 0))}
}

// commitGroup commits the batches one poll applied, across the partitions, in one
// transaction (one commit instead of one per partition: docs/adr/0005), answers
// their commands and ends each partition's in-flight commit with its outcome.
//
// If the database refuses the combined transaction, nothing of it was written, and
// its error does not say whose batch caused it: each batch is then committed on
// its own, exactly as if there had been no grouping, so a fenced partition, a stale
// snapshot or a poison command fails only its own partition and is handled there
// (failed, quarantine.go). An error that leaves the outcome unknown (a connection
// lost during the commit) is not retried here: every partition of the group gets
// it, goes back to its committed offset and re-applies from Kafka, where
// processed_commands tells what did commit.
func (e *Engine) commitGroup(ctx context.Context, group []*pending) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	errs := make([]error, len(group))
	if len(group) == 1 {
		errs[0] = e.commit(cctx, []*prepared{group[0].pr})
	} else {
		prs := make([]*prepared, len(group))
		for i, g := range group {
			prs[i] = g.pr
		}
		err := e.commit(cctx, prs)
		if err != nil && refused(err) {
			commitFallbacks.Inc()
			for i, g := range group {
				errs[i] = e.commit(cctx, []*prepared{g.pr})
			}
		} else {
			for i := range errs {
				errs[i] = err
			}
		}
	}
	for i, g := range group {
		g.ic.err = errs[i]
		if errs[i] == nil {
			consumerLag.WithLabelValues(strconv.Itoa(int(g.p.id))).Set(g.lag)
		}
		close(g.ic.done)
	}
}

// refused says the database answered the commit with an error, so its transaction
// rolled back and wrote nothing (as opposed to an unknown outcome).
func refused(err error) bool {
	var pqErr *pq.Error
	return errors.Is(err, storage.ErrFenced) || errors.Is(err, storage.ErrStaleSnapshot) || errors.As(err, &pqErr)
}

// settle takes note of the in-flight commit's outcome (waiting for it if wait is
// true). It returns false when that commit failed: then the partition was reset.
// Called with p.mu held.
func (e *Engine) settle(ctx context.Context, p *partition, wait bool) bool {
	ic := p.inflight
	if ic == nil {
		return true
	}
	if wait {
		<-ic.done
	} else {
		select {
		case <-ic.done:
		default:
			return true
		}
	}
	p.inflight = nil
	for _, id := range ic.ids {
		if ic.err == nil {
			p.recent[id] = p.uncommitted[id]
		}
		delete(p.uncommitted, id)
	}
	if ic.err == nil {
		e.releaseFinal(p, ic)
	}
	if ic.err == nil {
		p.committed = ic.next
		p.failures = 0
		return true
	}
	e.failed(ctx, p, ic.err, ic.first, ic.next, ic.count)
	return false
}

// failed throws away everything applied since the last commit: the actors (they
// rehydrate from the snapshots), the applied offset (back to the committed one) and
// the consumer position (sought back, so the records come again). A fenced
// partition is dropped. The failed batch held count records from offset first up
// to end (exclusive): a failure that retrying cannot fix narrows the next batches
// down to the command that causes it (quarantine.go). Called with p.mu held and no
// commit in flight.
func (e *Engine) failed(ctx context.Context, p *partition, err error, first, end int64, count int) {
	e.resetActors(p)
	p.open = nil // applied on top of what failed, or failed itself
	clear(p.uncommitted)
	p.next = p.committed
	switch {
	case errors.Is(err, storage.ErrFenced):
		batchFailures.WithLabelValues("fenced").Inc()
		e.log.Warn("batch fenced: partition now owned elsewhere", "partition", p.id, "epoch", p.epoch)
		p.dropped = true
		return
	case errors.Is(err, storage.ErrStaleSnapshot):
		batchFailures.WithLabelValues("stale").Inc()
	case count > 0 && permanent(err):
		// No pause: the same batch would fail the same way; a smaller one is tried
		// at once.
		batchFailures.WithLabelValues("permanent").Inc()
		e.narrow(p, err, first, end, count)
		e.seek(p)
		return
	default:
		batchFailures.WithLabelValues("error").Inc()
	}
	p.failures++
	backoff := min(50*time.Millisecond<<min(p.failures, 6), 2*time.Second)
	e.log.Warn("batch failed; going back to the committed offset", "partition", p.id, "offset", p.committed,
		"attempt", p.failures, "retry_in", backoff, "err", err)
	select {
	case <-ctx.Done():
	case <-time.After(backoff):
	}
	e.seek(p)
}

func (e *Engine) seek(p *partition) {
	p.seekedTo = p.next
	p.seeks++
	e.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{
		e.commands: {p.id: {Epoch: -1, Offset: p.next}},
	})
}

// deliver hands committed replies to their waiters.
func (e *Engine) deliver(out []outgoing) {
	for _, o := range out {
		if o.replyTo == "" {
			continue
		}
		if hub := replies.Local(o.replyTo); hub != nil {
			hub.Deliver(o.reply)
			repliesSent.WithLabelValues("local").Inc()
			continue
		}
		b, err := topics.EncodeReply(o.reply)
		if err != nil {
			continue
		}
		// Not ctx: the produce is asynchronous and must outlive the commit that
		// triggered it (its context ends when the commit returns).
		e.cl.Produce(context.Background(), &kgo.Record{Topic: e.cfg.Namespace.Topic(topics.RepliesTopic), Key: []byte(o.replyTo), Value: b}, func(_ *kgo.Record, err error) {
			if err != nil {
				// The API falls back to the stored reply when its wait times out.
				e.log.Warn("reply produce failed", "err", err)
			}
		})
		repliesSent.WithLabelValues("kafka").Inc()
	}
}

type outgoing struct {
	replyTo string
	reply   topics.Reply
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("engine: marshal %T: %v", v, err)) // only our own types reach here
	}
	return b
}
