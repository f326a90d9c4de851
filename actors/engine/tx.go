package engine

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"paysvc/actors/engine/aggregate"
	"paysvc/actors/values/ids"
	"paysvc/actors/values/ledger"
	"paysvc/storage"
	"paysvc/topics"
)

// Tx is what a kind's Apply works with: the instances hydration made live (its
// own and others', through their actors), the money API, facts its Prepare read,
// events and after-commit hooks. Nothing it does is kept unless Apply returns a
// reply without an Error, and then all of it is: a command's instances, ledger
// entries and events are atomic (a refusal puts every instance it changed back,
// latest first, and stops those it created).
type Tx struct {
	ctx     context.Context
	e       *Engine
	p       *partition
	b       *batch
	c       *topics.Command
	facts   map[string]any
	view    map[string]merchantState
	steps   []txStep
	entries []ledger.Entry
	events  []storage.OutboxEvent
	after   []func()
	anyway  []func()
}

// txStep is one change of an instance by the command: created says the command
// spawned it (undone by stopping it).
type txStep struct {
	in            *instance
	before, after any
	out           any
	created       bool
}

// Result is an instance's answer to Tx.Ask: its state before and after, what its
// Step said of the change, or its refusal (Err; the state did not change).
type Result struct {
	Before, After, Out any
	Err                error
}

// Context is the batch's context.
func (tx *Tx) Context() context.Context { return tx.ctx }

// Log is the engine's logger (with the command's context for its trace).
func (tx *Tx) Log() *slog.Logger { return tx.e.log }

// At is the batch's time: every timestamp a command writes.
func (tx *Tx) At() time.Time { return tx.b.at }

// Merchant is the command's merchant.
func (tx *Tx) Merchant() string { return tx.c.MerchantID }

// Find returns an instance of kind as the engine holds it (committed or not), as
// the command's merchant's; ok is false if it does not exist. It panics with
// errNotHydrated if the command's refs never named it (the command is then set
// aside: a programming error).
func (tx *Tx) Find(kind, id string) (state any, ok bool) {
	if in := tx.p.instanceOf(kind, tx.c.MerchantID, id); in != nil {
		return in.state, true
	}
	if !tx.p.asked[indexKey(kind, tx.c.MerchantID, id)] {
		panic(errNotHydrated)
	}
	return nil, false
}

// Live reports whether the merchant's instance of kind is in memory (created by
// the batch, say), whether or not the command's refs named it.
func (tx *Tx) Live(kind, id string) bool { return tx.p.instanceOf(kind, tx.c.MerchantID, id) != nil }

// Lookup returns the id of the merchant's instance of kind holding key (its
// kind's Index), if any. For a kind that loads by key (LoadKeys) the command
// must have named the key in its Needs (errNotHydrated otherwise); for the
// others only instances in memory are found.
func (tx *Tx) Lookup(kind, key string) (id string, ok bool) {
	id, ok = tx.p.index[indexKey(kind, tx.c.MerchantID, key)]
	if ok && tx.p.instanceOf(kind, tx.c.MerchantID, id) != nil {
		return id, true
	}
	if k := tx.e.kinds.byName[kind]; k != nil && k.LoadKeys != nil && !tx.p.asked[indexKey(kind, tx.c.MerchantID, "key:"+key)] {
		panic(errNotHydrated)
	}
	return "", false
}

// Ask runs msg through an instance's Step (in its actor). A refusal is the
// result's Err; an error (the actor did not answer, its Step panicked) must fail
// the batch. Asking an instance that does not exist answers ErrNotFound.
func (tx *Tx) Ask(kind, id string, msg any) (Result, error) {
	if _, ok := tx.Find(kind, id); !ok {
		return Result{}, ErrNotFound
	}
	return tx.step(tx.p.instanceOf(kind, tx.c.MerchantID, id), msg, false)
}

// Create is Ask on an instance that may not exist yet: a new one starts from its
// kind's New state (and goes again if the command is refused).
func (tx *Tx) Create(kind, id string, msg any) (Result, error) {
	in, created := tx.p.instanceOf(kind, tx.c.MerchantID, id), false
	if in == nil {
		k := tx.e.kinds.byName[kind]
		if k == nil {
			return Result{}, errors.New("engine: no kind " + kind)
		}
		in, created = tx.e.spawn(tx.p, k, tx.c.MerchantID, id, k.New(id), 0), true
	}
	r, err := tx.step(in, msg, created)
	if created && (err != nil || r.Err != nil) {
		tx.e.drop(tx.p, in) // a new instance that did not come to be
		liveActors.Set(float64(tx.e.live.Load()))
	}
	return r, err
}

func (tx *Tx) step(in *instance, msg any, created bool) (Result, error) {
	r, err := tx.e.ask(tx.p, in, func(corr uint64, reply chan<- aggregate.Response) any {
		return aggregate.Request{CorrID: corr, Cmd: msg, Reply: reply}
	})
	if err != nil {
		return Result{}, err
	}
	var pe aggregate.PanicError
	if errors.As(r.Err, &pe) {
		return Result{}, r.Err
	}
	if r.Err != nil {
		return Result{Before: r.Before, After: r.After, Err: r.Err}, nil
	}
	tx.steps = append(tx.steps, txStep{in: in, before: r.Before, after: r.After, out: r.Out, created: created})
	if es, ok := r.Out.([]ledger.Entry); ok {
		tx.entries = append(tx.entries, es...)
	}
	return Result{Before: r.Before, After: r.After, Out: r.Out}, nil
}

// Savepoint marks what the command did so far (Rollback).
func (tx *Tx) Savepoint() int { return len(tx.steps) }

// Rollback undoes the command's changes since sp: instances get their states
// back, latest first, and new ones stop; their ledger entries go.
func (tx *Tx) Rollback(sp int) error {
	for i := len(tx.steps) - 1; i >= sp; i-- {
		s := tx.steps[i]
		if s.created {
			tx.e.drop(tx.p, s.in)
			continue
		}
		if err := tx.e.restore(tx.p, s.in, s.before); err != nil {
			return err
		}
	}
	tx.steps = tx.steps[:sp]
	if sp == 0 {
		tx.events, tx.after = nil, nil
	}
	tx.entries = tx.entries[:0]
	for _, s := range tx.steps {
		if es, ok := s.out.([]ledger.Entry); ok {
			tx.entries = append(tx.entries, es...)
		}
	}
	liveActors.Set(float64(tx.e.live.Load()))
	return nil
}

// Fact is a fact the kind's Prepare read for this batch and merchant.
func (tx *Tx) Fact(key string) (any, bool) {
	v, ok := tx.facts[key]
	return v, ok
}

// TakenElsewhere reports that another merchant holds id of the command's kind
// (Kind.Taken): creating it would fail the commit on the primary key.
func (tx *Tx) TakenElsewhere(id string) bool {
	v, _ := tx.facts[takenFact+id]
	return v == true
}

// MerchantInfo is what the engine knows of a merchant the batch's commands name
// (the command's own, and its guard's subject).
type MerchantInfo struct {
	Exists      bool
	Environment string
	Enabled     bool
}

// MerchantOf reads a merchant of the batch's view (read before it applied).
func (tx *Tx) MerchantOf(id string) MerchantInfo {
	m := tx.view[id]
	return MerchantInfo{Exists: m.exists, Environment: m.environment, Enabled: m.enabled}
}

// TransactionID is a ledger transaction id derived from the command, stable
// across retries of the batch.
func (tx *Tx) TransactionID(parts ...string) string {
	return ids.Derive(10, append([]string{tx.c.ID, "txn"}, parts...)...)
}

// Event queues an outbox event (webhookTopic as in topics.EventTopics), keyed by key.
func (tx *Tx) Event(webhookTopic, key string, payload any) {
	tx.events = append(tx.events, tx.e.event(tx.c, tx.b.at, webhookTopic, key, payload))
}

// Emit queues any outbox record: a rail's request, a command for another
// partition.
func (tx *Tx) Emit(ev storage.OutboxEvent) { tx.events = append(tx.events, ev) }

// AfterCommit runs f once the batch holding this command committed (metrics), if
// the command succeeded.
func (tx *Tx) AfterCommit(f func()) { tx.after = append(tx.after, f) }

// AfterCommitAnyway runs f once the batch holding this command committed, even if
// the command was refused (a refused command is recorded too): a count of what
// was refused.
func (tx *Tx) AfterCommitAnyway(f func()) { tx.anyway = append(tx.anyway, f) }

// ErrNotFound: the instance does not exist for the command's merchant.
var ErrNotFound = errors.New("engine: not found")

// apply runs one command through its kind, keeping its effects only when it
// succeeds. A domain refusal is a reply; an error fails the batch.
func (e *Engine) apply(ctx context.Context, p *partition, b *batch, c *topics.Command, payload any,
	facts map[string]map[string]any, view map[string]merchantState) (topics.Reply, error) {
	k := e.kinds.byCmd[c.Type]
	if k == nil {
		return refuse(CodeUnknownCommand, "unknown command type "+c.Type, ""), nil
	}
	if payload == nil {
		return refuse(CodeInvalid, "malformed "+c.Type+" payload", ""), nil
	}
	tx := &Tx{ctx: ctx, e: e, p: p, b: b, c: c, facts: facts[k.Name+"\x00"+c.MerchantID], view: view}
	reply, err := k.Apply(tx, c, payload)
	if err != nil {
		return topics.Reply{}, err // the batch fails; the partition's state is reset
	}
	b.after = append(b.after, tx.anyway...)
	if reply.Error != nil {
		return reply, tx.Rollback(0)
	}
	if err := ledger.Balanced(tx.entries); err != nil {
		if uerr := tx.Rollback(0); uerr != nil {
			return topics.Reply{}, uerr
		}
		e.log.ErrorContext(ctx, "unbalanced command refused", "command_id", c.ID, "kind", k.Name, "err", err)
		return refuse(CodeInternal, "internal error", ""), nil
	}
	return reply, tx.keep()
}

// keep makes the command's changes the batch's: each instance it changed is
// written once, from its state before the command to its state after.
func (tx *Tx) keep() error {
	b := tx.b
	type touched struct {
		before any
		outs   []any
	}
	seen := map[*instance]*touched{}
	var order []*instance
	for _, s := range tx.steps {
		t := seen[s.in]
		if t == nil {
			t = &touched{before: s.before}
			seen[s.in] = t
			order = append(order, s.in)
		}
		t.outs = append(t.outs, s.out)
	}
	for _, in := range order {
		t, k := seen[in], in.kind
		prev := in.version
		in.version++
		rows := writes(b, k.Name, func() Rows {
			if k.Rows != nil {
				return k.Rows()
			}
			return newGenericWrites(k.Name)
		})
		if err := rows.Touch(in.merchant, in.id, Snapshot{ID: in.id, Version: prev, State: t.before},
			Snapshot{ID: in.id, Version: in.version, State: in.state}, t.outs); err != nil {
			return err // a state that cannot be stored: isolation sets the command aside
		}
		if k.Final != nil && k.Final(in.state) {
			b.final = append(b.final, [2]string{k.Name, instKey(in.merchant, in.id)})
		}
	}
	b.addEntries(tx.c.ID, tx.entries)
	b.outbox = append(b.outbox, tx.events...)
	b.after = append(b.after, tx.after...)
	return nil
}

// event builds an outbox record whose body is the exact envelope to publish.
func (e *Engine) event(c *topics.Command, at time.Time, webhookTopic, key string, payload any) storage.OutboxEvent {
	ev := eventEnvelope{
		ID: ids.DeriveUUID(c.ID, webhookTopic, key), Type: webhookTopic, Version: 1, OccurredAt: at,
		MerchantID: c.MerchantID, Key: key, Payload: payload,
	}
	return storage.OutboxEvent{EventID: ev.ID, Topic: topics.EventTopics[webhookTopic], Key: key, MerchantID: c.MerchantID, Body: mustJSON(ev)}
}

// eventEnvelope is topics.Event with the payload as a value, so the event is
// encoded in one pass: a json.RawMessage payload is encoded first and then
// scanned again (validated and compacted) inside the envelope, which measured
// ~1% of the service's CPU under transfer load (docs/benchmarks-history.md).
// The bytes are the same as topics.Event's (same fields, tags and order;
// TestEventEnvelopeMatchesTopicsEvent).
type eventEnvelope struct {
	ID         string    `json:"id"`
	Type       string    `json:"type"`
	Version    int       `json:"version"`
	OccurredAt time.Time `json:"occurred_at"`
	MerchantID string    `json:"merchant_id"`
	Key        string    `json:"key"`
	Payload    any       `json:"payload"`
}
