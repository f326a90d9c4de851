package engine

import (
	"context"
	"fmt"

	"github.com/anthdm/hollywood/actor"
	"github.com/jmoiron/sqlx"

	"paysvc/actors/engine/aggregate"
	"paysvc/storage"
	"paysvc/topics"
)

// An aggregate is declared with Define: its state type S, the store that reads
// it, and one On per command, each typed by its payload. The engine sees a Kind;
// the aggregate's code never sees an any it has to assert, and a missing required
// part does not compile. Optional parts are methods the engine discovers on the
// value given to Define (as river discovers JobArgsWithInsertOpts): an aggregate
// that hosts a pure step implements Hosting, one found by key implements
// KeyLoading, and so on. docs/adr/0007-one-aggregate-contract.md walks through
// adding one.

// Stored is one instance as its aggregate's store reads it: its id (unique per
// merchant), the version its row holds and its state.
type Stored[S any] struct {
	ID      string
	Version int64
	State   S
}

func (s Stored[S]) snapshot() Snapshot { return Snapshot{ID: s.ID, Version: s.Version, State: s.State} }

// Aggregate is what every aggregate gives Define: its kind name (see Kind.Name
// for what its migration must define) and how its stored instances are read.
type Aggregate[S any] interface {
	// Name is the kind's name in the batch commit and in Ref.Kind.
	Name() string
	// Load reads the merchant's stored instances among ids; missing ones are
	// simply absent.
	Load(ctx context.Context, q sqlx.QueryerContext, merchantID string, ids []string) ([]Stored[S], error)
}

// Hosting is an aggregate whose instances are actors of the engine's one shell
// (actors/engine/aggregate) running its pure Step; its commands change them with
// Of.Ask and Of.Create. Without it its instances can only be read (Of.Find).
type Hosting[S any] interface {
	// New is a new instance's state before its first step.
	New(id string) S
	// Step is the aggregate's transition function.
	Step(state S, msg any) (next S, out any, err error)
}

// OwnedLoading reads several merchants' instances in one query (the poll's
// preload), keyed by InstanceKey.
type OwnedLoading[S any] interface {
	LoadOwned(ctx context.Context, q sqlx.QueryerContext, want storage.Owned) (map[string]Stored[S], error)
}

// Indexing gives the keys an instance can be found by (Tx.Lookup).
type Indexing[S any] interface {
	Index(state S) []string
}

// KeyLoading reads stored instances by the keys Index gives (a Ref by Key).
type KeyLoading[S any] interface {
	Indexing[S]
	LoadKeys(ctx context.Context, q sqlx.QueryerContext, merchantID string, keys []string) ([]Stored[S], error)
}

// Referring lists the instances an instance refers to (the account its money
// sits in): loaded whenever it is needed.
type Referring[S any] interface {
	Refs(state S) []Ref
}

// Finishing says an instance will hardly change again: its actor is stopped as
// soon as the batch that made it so committed.
type Finishing[S any] interface {
	Final(state S) bool
}

// Writing is an aggregate with its own commit writer (a typed-array path), else
// the generic jsonb one.
type Writing[S any] interface {
	Rows() TypedRows[S]
}

// TypedRows is Rows with the aggregate's own states.
type TypedRows[S any] interface {
	Touch(merchant, id string, before, after Stored[S], outs []any) error
	Writes() storage.AggregateRows
}

// Claiming is an aggregate whose ids are its table's primary key across
// merchants (Kind.Taken): commands that open instances declare them with Creates.
type Claiming interface {
	Taken(ctx context.Context, q sqlx.QueryerContext, want storage.Owned) (map[string]bool, error)
}

// Simulating is an aggregate with a sandbox rail (Kind.Simulate).
type Simulating interface {
	Simulate(ctx context.Context, d SimDeps) error
}

// Command is one command type of an aggregate with state S, made by On.
type Command[S any] struct {
	typ     string
	guard   Guard
	decode  func() any
	ids     func(any) []string
	apply   func(*Tx, *topics.Command, any) (topics.Reply, error)
	accepts func(any) bool // the payload is this command's *P (not nil)
	options commandOptions
}

type commandOptions struct {
	needs   func(any) []Ref
	prepare func(context.Context, sqlx.QueryerContext, Finder, *topics.Command, any) (map[string]any, error)
	creates func(any) []string
}

// Option is an optional part of one command with payload P.
type Option[P any] struct{ set func(*commandOptions) }

// Finder finds the instances a batch holds, for Prepare (Of.Found types them).
type Finder func(kind, id string) (any, bool)

// On declares the command typ of an aggregate with state S: its guard (checked
// before apply: guard.go), the ids of the aggregate's instances a payload names,
// and apply, which runs one command through tx. A domain refusal is a reply with
// an Error (and nothing apply did through tx is kept); a returned error fails the
// batch (retried, or isolated and quarantined if permanent). The payload is
// decoded from the command's JSON into a new P once per batch.
func On[S, P any](typ string, guard Guard, ids func(p *P) []string, apply func(tx *Tx, c *topics.Command, p *P) (topics.Reply, error),
	opts ...Option[P]) Command[S] {
	c := Command[S]{
		typ:    typ,
		guard:  guard,
		decode: func() any { return new(P) },
		accepts: func(p any) bool {
			v, ok := p.(*P)
			return ok && v != nil
		},
		ids:   func(p any) []string { return ids(p.(*P)) },
		apply: func(tx *Tx, c *topics.Command, p any) (topics.Reply, error) { return apply(tx, c, p.(*P)) },
	}
	for _, o := range opts {
		o.set(&c.options)
	}
	return c
}

// Needs lists other instances a payload needs (of any kind, by id or key):
// hydration loads them all before the batch applies.
func Needs[P any](f func(p *P) []Ref) Option[P] {
	return Option[P]{func(o *commandOptions) { o.needs = func(p any) []Ref { return f(p.(*P)) } }}
}

// Prepare reads what a command needs that is no instance (whether an id is
// taken by any merchant): before the batch applies, never while it does. Its facts
// are the command's merchant's (Tx.Fact); find reads the instances the batch holds.
func Prepare[P any](f func(ctx context.Context, q sqlx.QueryerContext, find Finder, c *topics.Command, p *P) (map[string]any, error)) Option[P] {
	return Option[P]{func(o *commandOptions) {
		o.prepare = func(ctx context.Context, q sqlx.QueryerContext, find Finder, c *topics.Command, p any) (map[string]any, error) {
			return f(ctx, q, find, c, p.(*P))
		}
	}}
}

// Creates lists the ids a payload opens, for an aggregate that is Claiming.
func Creates[P any](f func(p *P) []string) Option[P] {
	return Option[P]{func(o *commandOptions) { o.creates = func(p any) []string { return f(p.(*P)) } }}
}

// SubjectOf is a Guard.Subject typed by the command's payload.
func SubjectOf[P any](f func(p *P) string) func(payload any) string {
	return func(payload any) string {
		if p, ok := payload.(*P); ok && p != nil {
			return f(p)
		}
		return ""
	}
}

// Define makes the engine's Kind of an aggregate and its commands. What cannot
// be told from types (a command that Creates ids of an aggregate that is not
// Claiming, a command type listed twice) panics: it is a programming error of
// the aggregate's definition, found by any test that builds the service.
func Define[S any](a Aggregate[S], commands ...Command[S]) Kind {
	name := a.Name()
	k := Kind{
		Name:     name,
		Commands: make(map[string]func() any, len(commands)),
		Guards:   make(map[string]Guard, len(commands)),
		Load: func(ctx context.Context, q sqlx.QueryerContext, merchantID string, ids []string) ([]Snapshot, error) {
			return snapshots(a.Load(ctx, q, merchantID, ids))
		},
	}
	byType := make(map[string]Command[S], len(commands))
	// Which options any command has: the engine skips a kind's Needs and Prepare
	// (a closure and a facts map per command) when none has them.
	creates, needs, prepares := false, false, false
	for _, c := range commands {
		if _, dup := byType[c.typ]; dup {
			panic(fmt.Sprintf("engine: %s lists command %q twice", name, c.typ))
		}
		byType[c.typ] = c
		k.Commands[c.typ] = c.decode
		k.Guards[c.typ] = c.guard
		creates = creates || c.options.creates != nil
		needs = needs || c.options.needs != nil
		prepares = prepares || c.options.prepare != nil
	}
	// A payload reaches a command's parts only as that command's own P: the
	// engine decoded it with the command's decode, and Apply checks it again
	// (a payload the engine could not decode is nil).
	k.IDs = func(typ string, payload any) []string {
		if c, ok := byType[typ]; ok && c.accepts(payload) {
			return c.ids(payload)
		}
		return nil
	}
	if needs {
		k.Needs = func(typ string, payload any) []Ref {
			if c, ok := byType[typ]; ok && c.options.needs != nil && c.accepts(payload) {
				return c.options.needs(payload)
			}
			return nil
		}
	}
	if prepares {
		k.Prepare = func(ctx context.Context, q sqlx.QueryerContext, find func(kind, id string) (any, bool), tc *topics.Command, payload any) (map[string]any, error) {
			if c, ok := byType[tc.Type]; ok && c.options.prepare != nil && c.accepts(payload) {
				return c.options.prepare(ctx, q, find, tc, payload)
			}
			return nil, nil
		}
	}
	k.Apply = func(tx *Tx, tc *topics.Command, payload any) (topics.Reply, error) {
		c, ok := byType[tc.Type]
		if !ok || !c.accepts(payload) {
			return Refuse(CodeInvalid, "malformed "+tc.Type+" payload", ""), nil
		}
		return c.apply(tx, tc, payload)
	}
	if cl, ok := a.(Claiming); ok {
		k.Taken = cl.Taken
		k.Creates = func(typ string, payload any) []string {
			if c, ok := byType[typ]; ok && c.options.creates != nil && c.accepts(payload) {
				return c.options.creates(payload)
			}
			return nil
		}
	} else if creates {
		panic(fmt.Sprintf("engine: %s has commands that create ids but does not implement Claiming", name))
	}
	if h, ok := a.(Hosting[S]); ok {
		k.Actor = func(state any) actor.Producer { return aggregate.Producer(name, as[S](state), h.Step) }
		k.New = func(id string) any { return h.New(id) }
	}
	if o, ok := a.(OwnedLoading[S]); ok {
		k.LoadOwned = func(ctx context.Context, q sqlx.QueryerContext, want storage.Owned) (map[string]Snapshot, error) {
			found, err := o.LoadOwned(ctx, q, want)
			if err != nil {
				return nil, err
			}
			out := make(map[string]Snapshot, len(found))
			for key, s := range found {
				out[key] = s.snapshot()
			}
			return out, nil
		}
	}
	if ix, ok := a.(Indexing[S]); ok {
		k.Index = func(state any) []string { return ix.Index(as[S](state)) }
	}
	if kl, ok := a.(KeyLoading[S]); ok {
		k.LoadKeys = func(ctx context.Context, q sqlx.QueryerContext, merchantID string, keys []string) ([]Snapshot, error) {
			return snapshots(kl.LoadKeys(ctx, q, merchantID, keys))
		}
	}
	if r, ok := a.(Referring[S]); ok {
		k.Refs = func(state any) []Ref { return r.Refs(as[S](state)) }
	}
	if f, ok := a.(Finishing[S]); ok {
		k.Final = func(state any) bool { return f.Final(as[S](state)) }
	}
	if w, ok := a.(Writing[S]); ok {
		k.Rows = func() Rows { return typedRows[S]{w.Rows()} }
	}
	if sim, ok := a.(Simulating); ok {
		k.Simulate = sim.Simulate
	}
	return k
}

// as is an instance's state as its aggregate's type: the engine holds states as
// any, and only this file turns them back (a nil state, the New of an aggregate
// that is not Hosting, is the zero S).
func as[S any](state any) S {
	s, _ := state.(S)
	return s
}

func snapshots[S any](found []Stored[S], err error) ([]Snapshot, error) {
	if err != nil {
		return nil, err
	}
	out := make([]Snapshot, len(found))
	for i, s := range found {
		out[i] = s.snapshot()
	}
	return out, nil
}

// typedRows is a TypedRows as the engine's Rows.
type typedRows[S any] struct{ r TypedRows[S] }

func (t typedRows[S]) Touch(merchant, id string, before, after Snapshot, outs []any) error {
	return t.r.Touch(merchant, id, stored[S](before), stored[S](after), outs)
}

func (t typedRows[S]) Writes() storage.AggregateRows { return t.r.Writes() }

func stored[S any](s Snapshot) Stored[S] {
	return Stored[S]{ID: s.ID, Version: s.Version, State: as[S](s.State)}
}

// Of is an aggregate's kind as its commands (and other aggregates' commands)
// use it through a Tx, typed by its state.
type Of[S any] string

// Outcome is what a step of an instance of S did.
type Outcome[S any] struct {
	Before, After S
	Out           any
	Err           error
}

func outcome[S any](r Result, err error) (Outcome[S], error) {
	return Outcome[S]{Before: as[S](r.Before), After: as[S](r.After), Out: r.Out, Err: r.Err}, err
}

// Find is Tx.Find of this kind.
func (k Of[S]) Find(tx *Tx, id string) (S, bool) {
	s, ok := tx.Find(string(k), id)
	return as[S](s), ok
}

// Found is a Prepare's find of this kind.
func (k Of[S]) Found(find Finder, id string) (S, bool) {
	s, ok := find(string(k), id)
	return as[S](s), ok
}

// Ask is Tx.Ask of this kind.
func (k Of[S]) Ask(tx *Tx, id string, msg any) (Outcome[S], error) {
	return outcome[S](tx.Ask(string(k), id, msg))
}

// Create is Tx.Create of this kind.
func (k Of[S]) Create(tx *Tx, id string, msg any) (Outcome[S], error) {
	return outcome[S](tx.Create(string(k), id, msg))
}

// FactOf is a fact a Prepare read (Tx.Fact) as the type it stored; ok is false
// when the fact is absent or of another type.
func FactOf[T any](tx *Tx, key string) (T, bool) {
	v, _ := tx.Fact(key)
	t, ok := v.(T)
	return t, ok
}

// OutOf is what a hosted step said (Outcome.Out, or one of TypedRows.Touch's
// outs) as its aggregate's type for it; ok is false for another type.
func OutOf[O any](out any) (O, bool) {
	o, ok := out.(O)
	return o, ok
}
