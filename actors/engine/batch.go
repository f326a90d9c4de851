package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"paysvc/actors/values/ledger"
	"paysvc/storage"
	"paysvc/topics"
)

// batch accumulates the effects of one partition's commands until they commit.
type batch struct {
	at      time.Time
	entries []storage.EntryWrite
	outbox  []storage.OutboxEvent
	// aggs are every kind's writes, in the order the batch first touched each kind.
	aggs     map[string]Rows
	aggOrder []string
	final    [][2]string // instances this batch made final (kind, key)
	// after runs once the batch committed (the kinds' metrics).
	after []func()
}

// writes returns the batch's collector of one kind, made by newRows the first time
// the batch touches that kind.
func writes(b *batch, kind string, newRows func() Rows) Rows {
	if w, ok := b.aggs[kind]; ok {
		return w
	}
	w := newRows()
	if b.aggs == nil {
		b.aggs = map[string]Rows{}
	}
	b.aggs[kind] = w
	b.aggOrder = append(b.aggOrder, kind)
	return w
}

func (b *batch) addEntries(commandID string, es []ledger.Entry) {
	for _, e := range es {
		b.entries = append(b.entries, storage.EntryWrite{Entry: e, CommandID: commandID})
	}
}

// prepared is an applied batch waiting for (or in) its commit.
type prepared struct {
	batch   storage.Batch
	out     []outgoing
	counts  map[[2]string]int
	issued  []time.Time
	replies map[string]topics.Reply // of the commands this batch applied
	final   [][2]string             // instances this batch made final
	after   []func()
	links   []trace.Link // the commands' spans (trace.go)
}

// openBatch is a partition's next batch while it is being applied: the records of
// every poll since the partition's last commit started, applied through the actors
// as they arrive (on top of the state the commit in flight writes), and committed
// together as soon as that commit is done (seal). So the apply of a batch runs
// beside the commit before it, and the batch still carries everything that arrived
// during that commit (docs/benchmarks-history.md).
type openBatch struct {
	b         *batch
	processed []storage.Processed
	out       []outgoing
	answered  map[string]topics.Reply // commands applied in this batch, for duplicates within it
	counts    map[[2]string]int
	issued    []time.Time
	first     int64 // offset of the batch's first record
	next      int64 // offset after its last record
	count     int   // records applied
	applies   int   // applyBatch calls that added to it
	hw        int64 // the partition's high watermark at the last poll
	// links are the applied commands' spans, for the commit's span (trace.go);
	// nil when tracing is off.
	links []trace.Link
}

func newOpenBatch(at time.Time, first int64) *openBatch {
	return &openBatch{b: &batch{at: at},
		answered: map[string]topics.Reply{}, counts: map[[2]string]int{}, first: first}
}

// prepared lays the open batch out for its commit.
func (ob *openBatch) prepared(p *partition) *prepared {
	b := ob.b
	sb := storage.Batch{
		Topic: topics.CommandsTopic, Partition: p.id, Epoch: p.epoch,
		NextOffset: ob.next, At: b.at,
		Entries: b.entries, Processed: ob.processed, Outbox: b.outbox,
	}
	for _, k := range b.aggOrder {
		sb.Aggregates = append(sb.Aggregates, b.aggs[k].Writes())
	}
	return &prepared{batch: sb, out: ob.out, counts: ob.counts, issued: ob.issued, replies: ob.answered,
		final: b.final, after: b.after, links: ob.links}
}

// applyBatch applies the records through the actors, adding their effects to the
// open batch. Nothing is written: an error leaves the actors and the open batch
// holding state that must not commit, and the caller throws both away.
//
// The batch's time (ob.b.at) is shared by every batch committed with it.
// Postgres keeps microseconds: the caller truncates it, so replies, events and
// later reads show the same timestamps.
//
// rd is the round the records came in (its reads answered), and rp the
// partition's share of it: payloads decoded already (nil: decoded here).
func (e *Engine) applyBatch(ctx context.Context, p *partition, ob *openBatch, recs []*kgo.Record, rd *round, rp *roundPart) error {
	reads := rd.reads
	cmds, payloads, held, err := e.decodeBatch(p, reads, rp, recs)
	if err != nil {
		return err
	}
	// The round read (startRound) the aggregates no actor held and the dedupe
	// read side by side, before this lock was taken; hydrate reads only what lost
	// its actor since. Hydration skips commands known applied (held) but not those
	// the dedupe read finds, which is harmless: a snapshot from the table is the
	// state any later command starts from.
	facts, err := e.hydrate(ctx, p, cmds, payloads, held, rd)
	if err != nil {
		return err
	}
	reads.wait()
	if reads.err != nil {
		return reads.err
	}
	// done and doneTypes are this batch's view of the poll's dedupe read (shared by
	// the partitions applied in parallel, so never written to), the table first.
	done, doneTypes := map[string][]byte{}, map[string]string{}
	for _, c := range cmds {
		if c == nil {
			continue
		}
		if stored, ok := reads.done[c.ID]; ok {
			done[c.ID], doneTypes[c.ID] = stored, reads.doneTypes[c.ID]
		} else if enc, ok := held[c.ID]; ok {
			done[c.ID] = enc
		}
	}

	// Only the merchants of commands that will apply (not answered from a reply).
	view, err := e.merchants.prefetch(ctx, e, cmds, payloads, func(c *topics.Command) bool {
		_, stored := done[c.ID]
		_, answered := ob.answered[c.ID]
		return stored || answered
	})
	if err != nil {
		return err
	}
	for i, c := range cmds {
		if c == nil {
			continue
		}
		if stored, ok := done[c.ID]; ok {
			r := expiredReply(c.ID)
			if t := doneTypes[c.ID]; t != "" && t != c.Type {
				r = reusedReply(c.ID) // another operation under the same id: never its reply
			} else if len(stored) > 0 { // empty: applied long ago, its reply trimmed by retention
				if r, err = topics.DecodeReply(stored); err != nil {
					return fmt.Errorf("stored reply of %s: %w", c.ID, err)
				}
			}
			ob.out = append(ob.out, outgoing{replyTo: c.ReplyTo, reply: r})
			ob.counts[[2]string{c.Type, "duplicate"}]++
			continue
		}
		if r, ok := ob.answered[c.ID]; ok {
			ob.out = append(ob.out, outgoing{replyTo: c.ReplyTo, reply: r})
			ob.counts[[2]string{c.Type, "duplicate"}]++
			continue
		}
		if err := e.applyOne(ctx, p, ob, c, recs[i], payloads[i], facts, view); err != nil {
			return err
		}
	}
	for _, c := range cmds {
		if c != nil && !c.IssuedAt.IsZero() {
			ob.issued = append(ob.issued, c.IssuedAt)
		}
	}
	ob.next = recs[len(recs)-1].Offset + 1
	ob.count += len(recs)
	ob.applies++
	return nil
}

// decodeBatch reads a batch's commands and their payloads (decoded by the round
// already, or here), and the replies this partition holds for any of them.
func (e *Engine) decodeBatch(p *partition, reads *pollReads, rp *roundPart, recs []*kgo.Record) (
	cmds []*topics.Command, payloads []any, held map[string][]byte, err error) {
	cmds = make([]*topics.Command, len(recs))
	payloads = make([]any, len(recs))
	// held are the replies of commands this partition applied that the table may
	// not show yet: those of the batch still being committed, and perhaps those
	// committed since the poll's dedupe read was taken.
	held = map[string][]byte{}
	for i, r := range recs {
		c, err := reads.command(r)
		if err != nil {
			// Nothing can answer a command without an id; skipping it (the offset
			// still advances) is the only way not to block the partition forever.
			e.log.Error("undecodable command skipped", "partition", p.id, "offset", r.Offset, "err", err)
			continue
		}
		cmds[i] = c
		if v, ok := rp.payload(r); ok {
			payloads[i] = v
		} else {
			payloads[i] = e.decodePayload(c)
		}
		r, ok := p.uncommitted[c.ID]
		if !ok {
			r, ok = p.recent[c.ID]
		}
		if ok {
			enc, err := topics.EncodeReply(r)
			if err != nil {
				return nil, nil, nil, err
			}
			held[c.ID] = enc
		}
	}
	return cmds, payloads, held, nil
}

// applyOne applies one command that is not a duplicate into the open batch:
// guarded, applied, answered and counted.
func (e *Engine) applyOne(ctx context.Context, p *partition, ob *openBatch, c *topics.Command, rec *kgo.Record, payload any,
	facts map[string]map[string]any, view map[string]merchantState) error {
	b := ob.b
	// The command's own span, continuing its request's trace (nil, and actx
	// ctx, when tracing is off).
	actx, span := e.traceApply(ctx, p, c, rec)
	events := len(b.outbox)
	reply, refused := e.guard(actx, c, payload, view)
	var err error
	if !refused {
		reply, err = e.applyContained(actx, p, b, c, payload, facts, view)
	}
	if span != nil {
		ob.links = endApply(actx, span, b.outbox[events:], reply, refused, err, ob.links)
	}
	if err != nil {
		return err
	}
	if refused {
		// Answered, not recorded (guard.go): nothing was applied.
		reply.CommandID = c.ID
		ob.out = append(ob.out, outgoing{replyTo: c.ReplyTo, reply: reply})
		ob.counts[[2]string{c.Type, "refused"}]++
		return nil
	}
	reply.CommandID = c.ID
	ob.answered[c.ID] = reply
	enc, err := topics.EncodeReply(reply)
	if err != nil {
		return err
	}
	ob.processed = append(ob.processed, storage.Processed{CommandID: c.ID, MerchantID: c.MerchantID, Type: c.Type, Offset: rec.Offset, Reply: enc})
	ob.out = append(ob.out, outgoing{replyTo: c.ReplyTo, reply: reply})
	outcome := "ok"
	if reply.Error != nil {
		outcome = "rejected"
	}
	ob.counts[[2]string{c.Type, outcome}]++
	return nil
}

// applyContained is apply with a panic turned into an error: a handler that panics
// on some input fails the batch (isolation then sets that command aside) instead of
// killing the process, which would meet the same command first again on restart.
func (e *Engine) applyContained(ctx context.Context, p *partition, b *batch, c *topics.Command, payload any,
	facts map[string]map[string]any, view map[string]merchantState) (r topics.Reply, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicError{value: v}
		}
	}()
	return e.apply(ctx, p, b, c, payload, facts, view)
}

// commit writes prepared batches of different partitions in one transaction and,
// once it is durable, answers their commands.
func (e *Engine) commit(ctx context.Context, prs []*prepared) error {
	ctx, span := traceCommit(ctx, prs)
	if span != nil {
		defer span.End()
	}
	start := time.Now()
	bs := make([]storage.Batch, len(prs))
	for i, pr := range prs {
		bs[i] = pr.batch
	}
	if err := storage.CommitBatches(ctx, e.db, bs); err != nil {
		if span != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		return err
	}
	commitDone := time.Now()
	batchCommitSeconds.Observe(commitDone.Sub(start).Seconds())
	commitPartitions.Observe(float64(len(prs)))
	n, events := 0, false
	for _, pr := range prs {
		n += len(pr.out)
		events = events || len(pr.batch.Outbox) > 0
	}
	batchSize.Observe(float64(n))
	for _, pr := range prs {
		for k, n := range pr.counts {
			commandsApplied.WithLabelValues(k[0], k[1]).Add(float64(n))
		}
		countMoney(pr.batch.Entries)
		for _, t := range pr.issued {
			commandE2ESeconds.Observe(commitDone.Sub(t).Seconds())
		}
		for _, f := range pr.after {
			f()
		}
		e.deliver(pr.out)
	}
	if events {
		e.cfg.OnCommit()
	}
	return nil
}

// expiredReply answers a command that was applied so long ago that its reply is no
// longer kept (docs/retention.md): it is refused, never applied a second time.
func expiredReply(commandID string) topics.Reply {
	return topics.Reply{CommandID: commandID, Error: &topics.ReplyError{Code: "reply_expired",
		Detail: "This request was already carried out, too long ago for its response to be kept. Send a new Idempotency-Key for a new request."}}
}

// pollReads is what the poll loop reads once for the records of every partition in
// the poll, instead of once per partition: the decoded commands, and one dedupe
// read of processed_commands for all their ids (one round trip per poll, not one
// per partition; docs/benchmarks-history.md). A commit that ends after
// the read was taken is covered by the partition's uncommitted and recent replies.
//
// Commands with a fresh id (topics.Command.FreshID: minted by the API for a
// request without an Idempotency-Key) are not read: no other command has their
// id, and their own record is never applied twice, since a batch's offset commits
// with its effects. A poll of such commands only (every request without a key)
// makes no read at all; on a busy machine that read took ~3 ms of the poll loop,
// as long as the commit it overlaps. If a fresh id were ever reused all the same,
// processed_commands' primary key refuses the batch (23505, a data error): the
// copy is isolated, recorded in the quarantine and answered with the stored reply,
// never applied twice (ADR 0006).
//
// The read runs beside the round's hydration reads (startRound): on a busy
// machine the two round trips in series were ~1.8 ms of a 3 ms STK apply round,
// while the commit before it waited for that round to end.
type pollReads struct {
	cmds      map[*kgo.Record]*topics.Command
	decodeErr map[*kgo.Record]error
	// ready is closed once done, doneTypes and err are set (nil: set already).
	ready     chan struct{}
	done      map[string][]byte
	doneTypes map[string]string
	err       error // the dedupe read failed: every batch of the poll fails with it
}

// wait blocks until the dedupe read has answered.
func (r *pollReads) wait() {
	if r.ready != nil {
		<-r.ready
	}
}

// readPoll decodes the poll's commands and starts reading which of them were
// applied already (wait for its answer).
func (e *Engine) readPoll(ctx context.Context, parts [][]*kgo.Record) *pollReads {
	r := &pollReads{cmds: map[*kgo.Record]*topics.Command{}, decodeErr: map[*kgo.Record]error{}}
	var ids []string
	for _, recs := range parts {
		for _, rec := range recs {
			c, err := topics.DecodeCommand(rec.Value)
			if err != nil {
				r.decodeErr[rec] = err
				continue
			}
			r.cmds[rec] = &c
			if !c.FreshID {
				ids = append(ids, c.ID)
			}
		}
	}
	dedupeIDs.WithLabelValues("fresh").Add(float64(len(r.cmds) - len(ids)))
	if len(ids) == 0 {
		r.done, r.doneTypes = map[string][]byte{}, map[string]string{}
		return r
	}
	dedupeIDs.WithLabelValues("read").Add(float64(len(ids)))
	r.ready = make(chan struct{})
	go func() {
		defer close(r.ready)
		start := time.Now()
		r.done, r.doneTypes, r.err = storage.ProcessedReplies(ctx, e.db, ids)
		dedupeReads.Observe(time.Since(start).Seconds())
	}()
	return r
}

// command is the record's decoded command (decoded now if the poll did not).
func (r *pollReads) command(rec *kgo.Record) (*topics.Command, error) {
	if c, ok := r.cmds[rec]; ok {
		return c, nil
	}
	if err, ok := r.decodeErr[rec]; ok {
		return nil, err
	}
	c, err := topics.DecodeCommand(rec.Value)
	if err != nil {
		return nil, err
	}
	return &c, nil
}
