package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/jmoiron/sqlx"

	"paysvc/actors/engine/aggregate"
	"paysvc/storage"
	"paysvc/topics"
)

// Aggregates (docs/adr/0007-one-aggregate-contract.md). Every aggregate plugs into
// the engine through Config.Kinds, built by one list (cmd/paysvc/service's
// Aggregates): the engine never names one. Each instance is a hollywood actor of the one shell
// (actors/engine/aggregate.Actor) hosting its kind's pure Step; a command's handler
// (Kind.Apply) works on instances through a Tx, and everything it did becomes the
// batch's only if it succeeds.

// Snapshot is one instance as stored: its id (unique per merchant), the version its
// row holds (kinds without their own Rows: the optimistic check of the generic
// update) and its state (the kind's own type, handed back to it untouched).
type Snapshot struct {
	ID      string
	Version int64
	State   any
}

// Ref names an instance a command or another instance needs in memory before the
// batch applies: by ID, or by Key, one of the keys its kind's Index gives it (a
// merchant's settlement account of a currency, a label). Instances are the
// merchant's of the command (or of the instance that refers to them).
type Ref struct {
	Kind, ID, Key string
}

// Rows is a kind's own writer of the batch commit (a typed-array path, such as
// migration 0039's): Touch gets, per instance a command changed, its state when
// the command started and when it ended, and what each of its steps said (their
// Out, in order); Writes is what storage.CommitBatch takes.
type Rows interface {
	Touch(merchant, id string, before, after Snapshot, outs []any) error
	Writes() storage.AggregateRows
}

// Kind is an aggregate as the engine sees it. Aggregates make theirs with Define
// (define.go), which fills these fields from typed parts; a Kind written by hand
// exists only in the engine's own tests.
type Kind struct {
	// Name is the kind in the batch commit: without Rows, its migration registers
	// it in batch_aggregates and defines paysvc_apply_<Name>(rows jsonb, at
	// timestamptz), which receives [{"id","merchant_id","prev","version","state"}...]
	// (prev 0: insert) and raises PS002 when an update finds no row at prev.
	Name string
	// Commands maps each command type of the kind to a constructor of its payload
	// (a pointer the command's JSON payload is decoded into).
	Commands map[string]func() any
	// Guards are what the engine checks of each command type before Apply
	// (guard.go): a type not listed gets the strictest guard.
	Guards map[string]Guard
	// IDs lists the instances of this kind a decoded payload of command type typ
	// names.
	IDs func(typ string, payload any) []string
	// Needs, optional, lists other instances a payload needs (of any kind, by id
	// or key): hydration loads them all before the batch applies.
	Needs func(typ string, payload any) []Ref
	// Refs, optional, lists the instances an instance refers to (the account its
	// money sits in): loaded whenever it is needed.
	Refs func(state any) []Ref
	// Index, optional, gives the keys an instance can be found by (Tx.Lookup);
	// LoadKeys, optional, reads stored instances by those keys (Needs by Key).
	Index    func(state any) []string
	LoadKeys func(ctx context.Context, q sqlx.QueryerContext, merchantID string, keys []string) ([]Snapshot, error)
	// Load reads the merchant's stored instances among ids; missing ones are
	// simply absent. LoadOwned, optional, reads several merchants' in one query
	// (the poll's preload, beside its dedupe read: round.go), by InstanceKey.
	Load      func(ctx context.Context, q sqlx.QueryerContext, merchantID string, ids []string) ([]Snapshot, error)
	LoadOwned func(ctx context.Context, q sqlx.QueryerContext, want storage.Owned) (map[string]Snapshot, error)
	// Prepare, optional, reads what a command needs that is no instance, such as
	// whether an id is taken by any merchant: before the batch applies, never while
	// it does. Its facts (key -> value) are the command's merchant's, for every
	// command of the kind in the batch (Tx.Fact). find reads the instances the
	// batch holds.
	Prepare func(ctx context.Context, q sqlx.QueryerContext, find func(kind, id string) (any, bool), c *topics.Command, payload any) (map[string]any, error)
	// Creates and Taken, optional, are for a kind whose ids are its table's
	// primary key across merchants (an invoice id). Creates lists the ids a
	// payload opens; Taken reads which of the (merchant, id) pairs the batch's
	// commands open are held by another merchant's row, returned by
	// InstanceKey. The kind's Apply refuses to create such an id (Tx.TakenElsewhere)
	// instead of letting the commit fail on the key and the command be
	// quarantined. One query per kind and batch, before the batch applies; a
	// clash that commits between that read and the batch's commit fails the
	// batch, which is read again, and then refused.
	Creates func(typ string, payload any) []string
	Taken   func(ctx context.Context, q sqlx.QueryerContext, want storage.Owned) (map[string]bool, error)
	// Actor, optional, makes an instance's actor from its state (Define fills it
	// for an aggregate that is Hosting): its Step runs the kind's transitions
	// (Tx.Ask). Without it an instance can only be read (Tx.Find).
	Actor func(state any) actor.Producer
	// New is a new instance's state before its first step (Tx.Create).
	New func(id string) any
	// Rows, optional, is the kind's own commit writer (else the generic jsonb one).
	Rows func() Rows
	// Final, optional, says an instance will hardly change again: its actor is
	// stopped as soon as the batch that made it so committed.
	Final func(state any) bool
	// Apply runs one command. A domain refusal is a reply with an Error (and then
	// nothing it did through tx is kept); a returned error fails the batch (and is
	// retried, or isolated and quarantined if permanent).
	Apply func(tx *Tx, c *topics.Command, payload any) (topics.Reply, error)
	// Simulate, optional, is the kind's sandbox rail: the service's rails role
	// runs it on a sandbox server.
	Simulate func(ctx context.Context, d SimDeps) error
}

// SimDeps is what a kind's sandbox simulator gets from the service.
type SimDeps struct {
	DB *sqlx.DB
	// Environment is the simulating process's (topics.Sandbox): a simulator
	// reads and answers only its own environment's merchants, and stamps it on
	// every command it produces, with Simulated set.
	Environment string
	// Produce appends a command to the command log (keyed by its merchant).
	Produce func(ctx context.Context, c topics.Command) error
	// Delay paces the simulated rail (PAYSVC_SIM_AGGREGATE_DELAY).
	Delay time.Duration
	Log   *slog.Logger
}

var kindName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,40}$`)

// registered is the list of kinds an engine was made with (Config.Kinds), indexed
// once at New: the hot path reads it without a lock, and no process-wide registry
// exists, so engines of different kinds can run side by side (tests) and nothing
// has to be reset between them.
type registered struct {
	byCmd  map[string]*Kind
	byName map[string]*Kind
	list   []*Kind
}

// register indexes kinds in their order. A kind that is incomplete, whose name
// is taken or invalid, or that claims a command type another kind handles is an
// error: those are programming errors of the service's one list.
func register(kinds []Kind) (registered, error) {
	r := registered{byCmd: map[string]*Kind{}, byName: map[string]*Kind{}}
	for _, k := range kinds {
		if !kindName.MatchString(k.Name) || k.IDs == nil || (k.Load == nil && k.LoadOwned == nil) || k.Apply == nil || len(k.Commands) == 0 ||
			(k.LoadKeys != nil && k.Index == nil) || (k.Taken == nil) != (k.Creates == nil) {
			return registered{}, fmt.Errorf("engine: incomplete or badly named kind %q", k.Name)
		}
		if _, taken := r.byName[k.Name]; taken {
			return registered{}, fmt.Errorf("engine: kind %q is listed twice", k.Name)
		}
		for typ := range k.Commands {
			if r.byCmd[typ] != nil {
				return registered{}, fmt.Errorf("engine: command type %q of kind %q is already handled by %q", typ, k.Name, r.byCmd[typ].Name)
			}
		}
		kk := k
		if kk.Actor == nil {
			kk.Actor = func(state any) actor.Producer { return aggregate.Producer[any](kk.Name, state, nil) }
		}
		if kk.New == nil {
			kk.New = func(string) any { return nil }
		}
		for typ := range k.Commands {
			r.byCmd[typ] = &kk
			// Every series an SRE may alert on exists from the start, at 0.
			for _, g := range []string{guardEnvironment, guardNoEnvironment, guardSimulated, guardDisabled} {
				guardRefusals.WithLabelValues(typ, g)
			}
		}
		r.byName[k.Name] = &kk
		r.list = append(r.list, &kk)
	}
	return r, nil
}

// decodePayload parses a command's payload once per batch into its kind's typed
// form; nil means the type is unknown or the payload malformed (apply refuses it).
func (e *Engine) decodePayload(c *topics.Command) any {
	k := e.kinds.byCmd[c.Type]
	if k == nil {
		return nil
	}
	v := k.Commands[c.Type]()
	if json.Unmarshal(c.Payload, v) != nil {
		return nil
	}
	return v
}

// refsOf lists what a command needs in memory: its kind's instances it names and
// the others it needs.
func (e *Engine) refsOf(c *topics.Command, payload any) []Ref {
	k := e.kinds.byCmd[c.Type]
	if k == nil || payload == nil {
		return nil
	}
	ids := k.IDs(c.Type, payload)
	refs := make([]Ref, 0, len(ids)+2)
	for _, id := range ids {
		refs = append(refs, Ref{Kind: k.Name, ID: id})
	}
	if k.Needs != nil {
		refs = append(refs, k.Needs(c.Type, payload)...)
	}
	return refs
}

func refuse(code, detail, attr string) topics.Reply {
	return topics.Reply{Error: &topics.ReplyError{Code: code, Detail: detail, Attr: attr}}
}

// Refuse is a domain refusal reply (code as the API maps it, docs/api-decisions.md).
func Refuse(code, detail, attr string) topics.Reply { return refuse(code, detail, attr) }

// Generic reply codes; each kind adds its own, which the API maps to HTTP statuses.
const (
	CodeInvalid        = "invalid"
	CodeNotFound       = "not_found"
	CodeUnknownCommand = "unknown_command"
	CodeInternal       = "internal"
	// CodeIDTaken refuses a command that creates an instance under an id another
	// instance holds (any merchant's): nothing changed, and the same request with
	// a freshly drawn id will do (the API draws one and sends it again).
	CodeIDTaken = "id_taken"
)

// genericRow is one instance's row for paysvc_apply_<kind>.
type genericRow struct {
	ID         string          `json:"id"`
	MerchantID string          `json:"merchant_id"`
	Prev       int64           `json:"prev"`
	Version    int64           `json:"version"`
	State      json.RawMessage `json:"state"`
}

// genericWrites is a kind's Rows when it has none of its own: per instance the
// version it had when the batch first touched it and its last state, as jsonb.
type genericWrites struct {
	kind  string
	prev  map[string]int64
	last  map[string]genericRow
	order []string
}

func newGenericWrites(kind string) Rows {
	return &genericWrites{kind: kind, prev: map[string]int64{}, last: map[string]genericRow{}}
}

func (w *genericWrites) Touch(merchant, id string, before, after Snapshot, _ []any) error {
	st, err := json.Marshal(after.State)
	if err != nil {
		return fmt.Errorf("%s %s: %w", w.kind, id, err)
	}
	key := instKey(merchant, id)
	if _, ok := w.last[key]; !ok {
		w.prev[key] = before.Version
		w.order = append(w.order, key)
	}
	w.last[key] = genericRow{ID: id, MerchantID: merchant, Prev: w.prev[key], Version: after.Version, State: st}
	return nil
}

func (w *genericWrites) Writes() storage.AggregateRows { return w }

// Kind implements storage.AggregateRows.
func (w *genericWrites) Kind() string { return w.kind }

// Rows implements storage.AggregateRows.
func (w *genericWrites) Rows() (json.RawMessage, error) {
	if len(w.order) == 0 {
		return nil, nil
	}
	rows := make([]genericRow, len(w.order))
	for i, k := range w.order {
		rows[i] = w.last[k]
	}
	return json.Marshal(rows)
}
