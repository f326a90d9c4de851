package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"paysvc/actors/ids"
	"paysvc/actors/invoice"
	"paysvc/actors/ledger"
	"paysvc/actors/money"
	"paysvc/actors/wallet"
	"paysvc/storage"
	"paysvc/topics"
)

// Registered aggregates (docs/adr/0004-engine-aggregate-registry.md).
//
// Wallets, invoices and payment files are built into the engine: their actors,
// hydration and handlers predate this registry and stay as they are. Every later
// aggregate (refunds first) plugs in through Register instead, and the engine
// never names it: its commands are decoded, hydrated, applied, committed, fenced,
// deduplicated, quarantined and rehydrated by the same code paths as the built-in
// ones, through the Kind it registered.

// Snapshot is one instance of a registered aggregate as stored: its id (unique per
// merchant), its version (the optimistic check of its update) and its state (the
// kind's own type, handed back to its Apply untouched).
type Snapshot struct {
	ID      string
	Version int64
	State   any
}

// Kind describes a registered aggregate.
type Kind struct {
	// Name is the kind in the batch commit: the migration registers it in
	// batch_aggregates and defines paysvc_apply_<Name>(rows jsonb, at timestamptz),
	// which receives [{"id","merchant_id","prev","version","state"}...] (prev 0:
	// insert) and raises PS002 when an update finds no row at prev.
	Name string
	// Commands maps each command type of the kind to a constructor of its payload
	// (a pointer the command's JSON payload is decoded into).
	Commands map[string]func() any
	// IDs lists the instances of this kind a decoded payload touches, so the batch
	// loads them all before applying (one Load per merchant and batch).
	IDs func(payload any) []string
	// Load reads the merchant's stored instances among ids; missing ones are
	// simply absent.
	Load func(ctx context.Context, q sqlx.QueryerContext, merchantID string, ids []string) ([]Snapshot, error)
	// Apply runs one command. A domain refusal is a reply with an Error (and then
	// nothing it did through tx is kept); a returned error fails the batch (and is
	// retried, or isolated and quarantined if permanent).
	Apply func(tx *Tx, c *topics.Command, payload any) (topics.Reply, error)
	// Simulate, if set, is the kind's sandbox rail: the service's rails role runs
	// it on a sandbox server (e.g. completing refunds after a delay).
	Simulate func(ctx context.Context, d SimDeps) error
	// Guards are what the engine checks of each command type before Apply
	// (guard.go): a type not listed gets the strictest guard (the merchant's
	// environment, and enabled).
	Guards map[string]Guard
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

var registry struct {
	sync.RWMutex
	kinds map[string]*Kind // by name
	cmds  map[string]*Kind // by command type
	order []string
}

// builtinCommand reports a command type the engine itself handles.
func builtinCommand(typ string) bool {
	return decodeBuiltin(&topics.Command{Type: typ, Payload: json.RawMessage(`{}`)}) != nil
}

// Register adds an aggregate kind. Call it once per kind at start-up, from the
// service's one registration list, before any engine runs. It panics on a kind
// that is incomplete, whose name is taken or invalid, or that claims a command
// type someone else handles: those are programming errors.
func Register(k Kind) {
	if !kindName.MatchString(k.Name) || k.IDs == nil || k.Load == nil || k.Apply == nil || len(k.Commands) == 0 {
		panic(fmt.Sprintf("engine: Register: incomplete or badly named kind %q", k.Name))
	}
	registry.Lock()
	defer registry.Unlock()
	if registry.kinds == nil {
		registry.kinds, registry.cmds = map[string]*Kind{}, map[string]*Kind{}
	}
	if _, taken := registry.kinds[k.Name]; taken || k.Name == storage.InvoiceKind || k.Name == storage.PayoutKind {
		panic(fmt.Sprintf("engine: Register: kind %q is already registered", k.Name))
	}
	kk := k
	for typ := range k.Commands {
		if builtinCommand(typ) || registry.cmds[typ] != nil {
			panic(fmt.Sprintf("engine: Register: command type %q of kind %q is already handled", typ, k.Name))
		}
	}
	for typ := range k.Commands {
		registry.cmds[typ] = &kk
	}
	registry.kinds[k.Name] = &kk
	registry.order = append(registry.order, k.Name)
}

// Registered reports whether a kind of that name is registered.
func Registered(name string) bool {
	registry.RLock()
	defer registry.RUnlock()
	_, ok := registry.kinds[name]
	return ok
}

// Kinds lists the registered kinds in registration order.
func Kinds() []Kind {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]Kind, 0, len(registry.order))
	for _, n := range registry.order {
		out = append(out, *registry.kinds[n])
	}
	return out
}

// registered is the registry as an engine saw it when it was made: kinds are
// registered at start-up, so the hot path reads it without a lock.
type registered struct {
	byCmd map[string]*Kind
	list  []*Kind
}

func snapshotRegistry() registered {
	registry.RLock()
	defer registry.RUnlock()
	r := registered{byCmd: map[string]*Kind{}}
	for _, n := range registry.order {
		r.list = append(r.list, registry.kinds[n])
	}
	for typ, k := range registry.cmds {
		r.byCmd[typ] = k
	}
	return r
}

// decodePayload parses a command's payload once per batch into its typed form:
// the built-in commands' (wallet_handlers.go), else a registered kind's; nil
// means the type is unknown or the payload malformed (apply refuses it).
func (e *Engine) decodePayload(c *topics.Command) any {
	if v := decodeBuiltin(c); v != nil {
		return v
	}
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

// liveAgg is an instance of a registered kind held by the partition: its latest
// applied state, committed or not. Plain values, not actors: the partition applies
// one command at a time under its lock, and a reset simply forgets them.
type liveAgg struct {
	snap     Snapshot
	lastUsed time.Time
}

func aggKey(merchant, id string) string { return merchant + "\x00" + id }

// hydrateRegistered loads, per kind and merchant, the instances the batch's commands
// name that the partition does not hold.
func (e *Engine) hydrateRegistered(ctx context.Context, p *partition, cmds []*topics.Command, payloads []any, done map[string][]byte) error {
	for _, k := range e.kinds.list {
		live := p.aggs[k.Name]
		want, seen := map[string][]string{}, map[string]bool{}
		for i, c := range cmds {
			if c == nil || payloads[i] == nil || e.kinds.byCmd[c.Type] != k {
				continue
			}
			if _, applied := done[c.ID]; applied {
				continue
			}
			for _, id := range k.IDs(payloads[i]) {
				key := aggKey(c.MerchantID, id)
				if a, ok := live[key]; ok {
					a.lastUsed = time.Now()
					continue
				}
				if !seen[key] {
					seen[key] = true
					want[c.MerchantID] = append(want[c.MerchantID], id)
				}
			}
		}
		for merchant, list := range want {
			found, err := k.Load(ctx, e.db, merchant, list)
			if err != nil {
				return fmt.Errorf("load %s: %w", k.Name, err)
			}
			if p.aggs[k.Name] == nil {
				p.aggs[k.Name] = map[string]*liveAgg{}
			}
			for _, s := range found {
				key := aggKey(merchant, s.ID)
				if _, ok := p.aggs[k.Name][key]; !ok {
					p.aggs[k.Name][key] = &liveAgg{snap: s, lastUsed: time.Now()}
					e.live.Add(1)
				}
			}
		}
	}
	liveActors.Set(float64(e.live.Load()))
	return nil
}

// applyRegistered runs a registered kind's command through a Tx, keeping its
// effects only when it succeeds.
func (e *Engine) applyRegistered(ctx context.Context, p *partition, b *batch, c *topics.Command, k *Kind, payload any) (topics.Reply, error) {
	if payload == nil {
		return refuse(CodeInvalid, "malformed "+c.Type+" payload", ""), nil
	}
	tx := &Tx{ctx: ctx, e: e, p: p, b: b, c: c, k: k, puts: map[string]any{}}
	reply, err := k.Apply(tx, c, payload)
	if err != nil {
		return topics.Reply{}, err // the batch fails; the partition's state is reset
	}
	if reply.Error != nil {
		if err := tx.undo(); err != nil {
			return topics.Reply{}, err
		}
		return reply, nil
	}
	if err := ledger.Balanced(tx.entries); err != nil {
		if uerr := tx.undo(); uerr != nil {
			return topics.Reply{}, uerr
		}
		e.log.ErrorContext(ctx, "unbalanced command refused", "command_id", c.ID, "kind", k.Name, "err", err)
		return refuse(CodeInternal, "internal error", ""), nil
	}
	for _, w := range tx.wallets {
		b.touch(w.before, w.after)
	}
	b.addEntries(c.ID, tx.entries)
	b.outbox = append(b.outbox, tx.events...)
	if p.aggs[k.Name] == nil {
		p.aggs[k.Name] = map[string]*liveAgg{}
	}
	rows := writes(b, k.Name, func() *genericWrites {
		return &genericWrites{kind: k.Name, prev: map[string]int64{}, last: map[string]genericRow{}}
	})
	for _, id := range tx.order {
		key := aggKey(c.MerchantID, id)
		a := p.aggs[k.Name][key]
		var before int64
		if a == nil {
			a = &liveAgg{}
			p.aggs[k.Name][key] = a
			e.live.Add(1)
		} else {
			before = a.snap.Version
		}
		a.snap = Snapshot{ID: id, Version: before + 1, State: tx.puts[id]}
		a.lastUsed = time.Now()
		if err := rows.touch(c.MerchantID, id, before, a.snap); err != nil {
			return topics.Reply{}, err // a state that cannot be stored: isolation sets the command aside
		}
	}
	b.after = append(b.after, tx.after...)
	return reply, nil
}

// Tx is what a registered kind's Apply works with: its own instances, the
// wallets (through the wallet actors: the same money rules as every built-in
// command), read access to invoices, events and after-commit hooks. Nothing it
// does is kept unless Apply returns a reply without an Error.
type Tx struct {
	ctx     context.Context
	e       *Engine
	p       *partition
	b       *batch
	c       *topics.Command
	k       *Kind
	puts    map[string]any
	order   []string
	wallets []walletStep
	entries []ledger.Entry
	events  []storage.OutboxEvent
	after   []func()
}

type walletStep struct {
	ref           *actorRef
	before, after wallet.State
}

// Context is the batch's context (for reads).
func (tx *Tx) Context() context.Context { return tx.ctx }

// At is the batch's time: every timestamp a command writes.
func (tx *Tx) At() time.Time { return tx.b.at }

// DB reads committed data (e.g. a lookup the kind needs). What this batch or the
// one being committed changed is not there yet: use Get for the kind's state.
func (tx *Tx) DB() sqlx.QueryerContext { return tx.e.db }

// Get returns an instance of the kind (loaded by hydration, or put earlier in this
// batch), as the command's merchant's; ok is false if it does not exist.
func (tx *Tx) Get(id string) (state any, ok bool) {
	if s, ok := tx.puts[id]; ok {
		return s, true
	}
	a := tx.p.aggs[tx.k.Name][aggKey(tx.c.MerchantID, id)]
	if a == nil {
		return nil, false
	}
	return a.snap.State, true
}

// Put records an instance's new state (created if new). The state must marshal to
// the JSON the kind's paysvc_apply_<kind> reads.
func (tx *Tx) Put(id string, state any) {
	if _, ok := tx.puts[id]; !ok {
		tx.order = append(tx.order, id)
	}
	tx.puts[id] = state
}

// ErrNotFound: the invoice or wallet does not exist for the command's merchant.
var ErrNotFound = errors.New("engine: not found")

// Invoice reads one of the merchant's invoices as the engine holds it (including
// changes not committed yet).
func (tx *Tx) Invoice(id string) (invoice.State, error) {
	p, e := tx.p, tx.e
	ref := p.invoices[id]
	if ref == nil {
		found, err := storage.LoadInvoices(tx.ctx, e.db, tx.c.MerchantID, []string{id})
		if err != nil {
			return invoice.State{}, err
		}
		s, ok := found[id]
		if !ok {
			return invoice.State{}, ErrNotFound
		}
		ref = e.spawnInvoice(p, s)
	}
	resp, err := e.askInvoice(p, ref, func(corr uint64, reply chan<- invoice.Response) any {
		return invoice.Get{CorrID: corr, Reply: reply}
	})
	if err != nil {
		return invoice.State{}, err
	}
	if resp.After.MerchantID != tx.c.MerchantID || !resp.After.Exists() {
		return invoice.State{}, ErrNotFound
	}
	return resp.After, nil
}

func (tx *Tx) walletRef(id string) (*actorRef, error) {
	p, e := tx.p, tx.e
	if ref := p.wallets[id]; ref != nil {
		return ref, nil
	}
	found, err := storage.LoadWallets(tx.ctx, e.db, tx.c.MerchantID, []string{id})
	if err != nil {
		return nil, err
	}
	s, ok := found[id]
	if !ok {
		return nil, ErrNotFound
	}
	return e.spawn(p, s), nil
}

// Wallet reads one of the merchant's wallets as the engine holds it.
func (tx *Tx) Wallet(id string) (wallet.State, error) {
	ref, err := tx.walletRef(id)
	if err != nil {
		return wallet.State{}, err
	}
	resp, err := tx.e.ask(tx.p, ref, func(corr uint64, reply chan<- wallet.Response) any {
		return wallet.Get{CorrID: corr, Reply: reply}
	})
	if err != nil {
		return wallet.State{}, err
	}
	if s := resp.Result.State; !s.Exists() || s.MerchantID != tx.c.MerchantID {
		return wallet.State{}, ErrNotFound
	}
	return resp.Result.State, nil
}

// WalletError is a wallet's refusal of a Tx's wallet operation (insufficient
// funds, wrong merchant...): WalletRefusal turns it into the standard reply.
type WalletError struct{ Err error }

func (e WalletError) Error() string { return e.Err.Error() }
func (e WalletError) Unwrap() error { return e.Err }

// walletCmd applies one wallet command through its actor. A wallet refusal is a
// WalletError (Apply should answer it with WalletRefusal); any other error
// should fail the batch.
func (tx *Tx) walletCmd(walletID string, cmd any) error {
	ref, err := tx.walletRef(walletID)
	if errors.Is(err, ErrNotFound) {
		return WalletError{Err: wallet.ErrNotFound}
	}
	if err != nil {
		return err
	}
	resp, err := tx.e.ask(tx.p, ref, func(corr uint64, reply chan<- wallet.Response) any {
		return wallet.Request{CorrID: corr, Reply: reply, Cmd: cmd}
	})
	if err != nil {
		return err
	}
	if resp.Err != nil {
		var pe wallet.PanicError
		if errors.As(resp.Err, &pe) {
			return resp.Err
		}
		return WalletError{Err: resp.Err}
	}
	tx.wallets = append(tx.wallets, walletStep{ref: ref, before: resp.Before, after: resp.Result.State})
	tx.entries = append(tx.entries, resp.Result.Entries...)
	return nil
}

// Hold sets amount of the wallet's available balance aside (wallet.Hold).
func (tx *Tx) Hold(walletID string, amount money.Amount) error {
	return tx.walletCmd(walletID, wallet.Hold{MerchantID: tx.c.MerchantID, Amount: amount, At: tx.b.at})
}

// Release makes held (or uncleared) funds available again (wallet.Release).
func (tx *Tx) Release(walletID string, amount money.Amount) error {
	return tx.walletCmd(walletID, wallet.Release{MerchantID: tx.c.MerchantID, Amount: amount, At: tx.b.at})
}

// Debit pays held funds out of the wallet to a system account, with balanced
// ledger entries (wallet.Disburse): items' amounts go to clearing, their charges
// to the fees account; transType names the statement line.
func (tx *Tx) Debit(walletID, clearing, transType string, items []wallet.Disbursement) error {
	return tx.walletCmd(walletID, wallet.Disburse{MerchantID: tx.c.MerchantID, Items: items, Clearing: clearing,
		TransType: transType, At: tx.b.at})
}

// Credit brings value into the wallet from a system account (wallet.Collect):
// net to the wallet, charges to the fees account, value out of clearing.
func (tx *Tx) Credit(walletID string, c wallet.Collect) error {
	c.MerchantID, c.At = tx.c.MerchantID, tx.b.at
	return tx.walletCmd(walletID, c)
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

// AfterCommit runs f once the batch holding this command committed (metrics).
func (tx *Tx) AfterCommit(f func()) { tx.after = append(tx.after, f) }

// undo gives the wallets their states back, latest first.
func (tx *Tx) undo() error {
	for i := len(tx.wallets) - 1; i >= 0; i-- {
		if err := tx.e.restore(tx.p, tx.wallets[i].ref, tx.wallets[i].before); err != nil {
			return err
		}
	}
	tx.wallets, tx.entries, tx.events, tx.after = nil, nil, nil, nil
	return nil
}

// Refuse is a domain refusal reply (code as the API maps it, docs/api-decisions.md).
func Refuse(code, detail, attr string) topics.Reply { return refuse(code, detail, attr) }

// WalletRefusal is the standard reply to a wallet's refusal.
func WalletRefusal(err error) topics.Reply { return walletRefusal(err) }

// genericRow is one instance's row for paysvc_apply_<kind>.
type genericRow struct {
	ID         string          `json:"id"`
	MerchantID string          `json:"merchant_id"`
	Prev       int64           `json:"prev"`
	Version    int64           `json:"version"`
	State      json.RawMessage `json:"state"`
}

// genericWrites is a registered kind's storage.AggregateRows: per instance the
// version it had when the batch first touched it and its last state.
type genericWrites struct {
	kind  string
	prev  map[string]int64
	last  map[string]genericRow
	order []string
}

func (w *genericWrites) touch(merchant, id string, before int64, s Snapshot) error {
	st, err := json.Marshal(s.State)
	if err != nil {
		return fmt.Errorf("%s %s: %w", w.kind, id, err)
	}
	key := aggKey(merchant, id)
	if _, ok := w.last[key]; !ok {
		w.prev[key] = before
		w.order = append(w.order, key)
	}
	w.last[key] = genericRow{ID: id, MerchantID: merchant, Prev: w.prev[key], Version: s.Version, State: st}
	return nil
}

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

// dropIdleRegistered forgets registered instances unused since idleSince.
func (e *Engine) dropIdleRegistered(p *partition, idleSince time.Time) {
	for _, m := range p.aggs {
		for key, a := range m {
			if a.lastUsed.Before(idleSince) {
				delete(m, key)
				e.live.Add(-1)
			}
		}
	}
}

// dropRegistered forgets every registered instance (a reset: they reload from
// their snapshots on next use).
func (e *Engine) dropRegistered(p *partition) {
	for k, m := range p.aggs {
		e.live.Add(-int64(len(m)))
		delete(p.aggs, k)
	}
}

// Merchant is the command's merchant.
func (tx *Tx) Merchant() string { return tx.c.MerchantID }
