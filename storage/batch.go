package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"go.opentelemetry.io/otel/attribute"

	"paysvc/actors/values/ledger"
	"paysvc/actors/values/money"
	"paysvc/topics/tracing"
)

// ErrFenced means the partition's owner epoch moved on: another worker claimed the
// partition, and this worker's batch must not (and did not) commit.
var ErrFenced = errors.New("partition fenced: another worker owns it")

// ErrStaleSnapshot means a snapshot's version was not the one the worker started
// from: the batch rolled back and the worker must rehydrate.
var ErrStaleSnapshot = errors.New("stale wallet snapshot")

// ClaimPartition makes owner the partition's writer: it bumps the owner epoch (so
// any previous owner's next batch is fenced) and returns the epoch and the offset
// to resume from. A partition never seen before starts at offset 0.
func ClaimPartition(ctx context.Context, db *sqlx.DB, topic string, partition int32, owner string) (epoch, nextOffset int64, err error) {
	err = db.QueryRowxContext(ctx, `INSERT INTO partition_offsets (topic, partition, epoch, next_offset, owner)
		VALUES ($1, $2, 1, 0, $3)
		ON CONFLICT (topic, partition) DO UPDATE SET epoch = partition_offsets.epoch + 1, owner = $3, updated_at = now()
		RETURNING epoch, next_offset`, topic, partition, owner).Scan(&epoch, &nextOffset)
	if err != nil {
		return 0, 0, fmt.Errorf("claim partition %s/%d: %w", topic, partition, err)
	}
	return epoch, nextOffset, nil
}

// PartitionOffset reads the stored next offset of a partition (-1 if none).
func PartitionOffset(ctx context.Context, q sqlx.QueryerContext, topic string, partition int32) (int64, error) {
	var off int64
	err := sqlx.GetContext(ctx, q, &off, `SELECT next_offset FROM partition_offsets WHERE topic = $1 AND partition = $2`, topic, partition)
	if errors.Is(err, sql.ErrNoRows) {
		return -1, nil
	}
	return off, err
}

// WalletRow is a wallet's row in the commit: the columns of the wallets table. The
// wallet aggregate fills it (walletstore.Row); storage names no aggregate.
type WalletRow struct {
	WalletID, MerchantID, Currency, WalletType, Label string
	CanDisburse                                       bool
	CurrentBalance, AvailableBalance                  money.Amount
	Version                                           int64
	CreatedAt, UpdatedAt                              time.Time
}

// WalletWrite is a snapshot to store. PrevVersion 0 inserts a new wallet; otherwise
// the row is updated only if it still has PrevVersion.
type WalletWrite struct {
	Row         WalletRow
	PrevVersion int64
}

// WalletKind is the wallets' kind: their writes go as the core's typed arrays
// (WalletWrites), never through a paysvc_apply_ function.
const WalletKind = "wallet"

// WalletWrites collects the wallets a batch changed (the wallets' kind's rows):
// for each, the version it had when the batch first touched it and its last state.
type WalletWrites struct {
	w     map[string]*WalletWrite
	order []string
}

// NewWalletWrites returns an empty collector.
func NewWalletWrites() *WalletWrites { return &WalletWrites{w: map[string]*WalletWrite{}} }

// Touch records a wallet's new row, remembering the version the batch started
// from (prev, the version of the state its first change started from: the
// snapshot UPDATE is conditional on it).
func (ws *WalletWrites) Touch(prev int64, after WalletRow) {
	w, ok := ws.w[after.WalletID]
	if !ok {
		w = &WalletWrite{PrevVersion: prev}
		ws.w[after.WalletID] = w
		ws.order = append(ws.order, after.WalletID)
	}
	w.Row = after
}

// Writes are the collected wallets in the order the batch first touched them.
func (ws *WalletWrites) Writes() []WalletWrite {
	out := make([]WalletWrite, len(ws.order))
	for i, id := range ws.order {
		out[i] = *ws.w[id]
	}
	return out
}

// Kind implements AggregateRows.
func (ws *WalletWrites) Kind() string { return WalletKind }

// Rows implements AggregateRows: nothing, as execCommit takes the writes apart.
func (ws *WalletWrites) Rows() (json.RawMessage, error) { return nil, nil }

// Processed is a command applied in the batch, with its stored reply.
type Processed struct {
	CommandID  string
	MerchantID string
	Type       string
	Offset     int64
	Reply      []byte
}

// OutboxEvent is an event to publish after the commit.
type OutboxEvent struct {
	EventID    string
	Topic      string
	Key        string
	MerchantID string
	Body       []byte
	// TraceParent is the W3C context of the command's span that wrote the event
	// ("" when tracing is off): the relay's publish continues it (package tracing).
	TraceParent string
}

// Batch is everything one partition worker commits at once: the fixed core
// (offset, wallets, ledger entries, processed commands, outbox) and the rows of
// every other aggregate the batch touched.
type Batch struct {
	Topic      string
	Partition  int32
	Epoch      int64
	NextOffset int64
	At         time.Time
	// Wallets stay typed arrays in the core: every transfer writes two, and the
	// jsonb path was measured slower for them (docs/adr/0003-generic-batch-commit.md).
	Wallets   []WalletWrite
	Entries   []EntryWrite
	Processed []Processed
	Outbox    []OutboxEvent
	// Aggregates are the other aggregates' writes, applied in this order by their
	// own SQL functions inside the same call.
	Aggregates []AggregateRows
}

// AggregateRows is what one kind of aggregate writes in a batch. CommitBatch sends
// Rows next to Kind, and the commit function hands them to that aggregate's own
// function paysvc_apply_<Kind>(rows jsonb, at timestamptz) (its file in
// storage/functions), its kind registered in batch_aggregates by the aggregate's
// migration. So a new aggregate brings its own type implementing this, its own
// migration and function file, and nothing in the core changes.
//
// The function must raise PS002 (ErrStaleSnapshot) when a version-checked update
// finds another version; any other error it raises reaches the engine with its own
// SQLSTATE (classes 22, 23 and 54 set the command aside, see actors/engine).
type AggregateRows interface {
	// Kind names the aggregate: lowercase letters, digits and '_', as registered.
	Kind() string
	// Rows is the aggregate's JSON for its function; nil means nothing to write.
	Rows() (json.RawMessage, error)
}

// validKind mirrors the CHECK of batch_aggregates.kind, to fail early, without a
// round trip, on a kind that could never be registered.
func validKind(k string) bool {
	if k == "" || len(k) > 41 || k[0] < 'a' || k[0] > 'z' {
		return false
	}
	for _, c := range k {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// aggregateArrays lays the aggregates' rows out as the core's (a_kind, a_rows)
// arrays, skipping those with nothing to write. The rows go as a textArray (one
// buffer, their bytes unchanged): they are the largest argument of an STK commit,
// and pq.StringArray copied them three times on the way (the engine's largest
// allocator; docs/benchmarks-history.md).
func aggregateArrays(as []AggregateRows) (kinds stringArray, rows textArray, err error) {
	kinds, rows = make(stringArray, 0, len(as)), make(textArray, 0, len(as))
	for _, a := range as {
		k := a.Kind()
		if !validKind(k) {
			return nil, nil, fmt.Errorf("batch: aggregate kind %q is not a valid kind", k)
		}
		r, err := a.Rows()
		if err != nil {
			return nil, nil, fmt.Errorf("batch: %s rows: %w", k, err)
		}
		if len(r) == 0 {
			continue
		}
		kinds, rows = append(kinds, k), append(rows, r)
	}
	return kinds, rows, nil
}

// EntryWrite is a ledger entry with the command that made it.
type EntryWrite struct {
	ledger.Entry
	CommandID string
}

// CommitBatch writes a batch atomically with one call of paysvc_commit_batches_v3,
// its arrays of one partition (one round trip, whatever the aggregates). Its first statement advances the
// partition's offset only if the epoch is still ours, so a worker that lost the
// partition gets ErrFenced and writes nothing; snapshot updates are version-checked
// (ErrStaleSnapshot), in the core and in every aggregate's function.
func CommitBatch(ctx context.Context, db *sqlx.DB, b Batch) error {
	cPart := make(pq.Int64Array, len(b.Processed))
	for i := range cPart {
		cPart[i] = int64(b.Partition)
	}
	return execCommit(ctx, db, b, []any{b.Topic, pq.Int64Array{int64(b.Partition)}, pq.Int64Array{b.Epoch}, pq.Int64Array{b.NextOffset}}, cPart)
}

// execCommit lays a batch out as the commit function's arrays and calls it with
// fence (topic, partitions, epochs, next offsets) first; cPart is the partition of
// each processed command.
func execCommit(ctx context.Context, db *sqlx.DB, b Batch, fence []any, cPart pq.Int64Array) error {
	// Wallets go as the core's typed arrays, whether set in Wallets or collected
	// by the wallets' kind (WalletWrites); invoices as their column arrays
	// (migration 0039); every other kind to its function.
	wallets := b.Wallets
	inv, rest := newInvoiceCols(), make([]AggregateRows, 0, len(b.Aggregates))
	for _, a := range b.Aggregates {
		switch w := a.(type) {
		case *WalletWrites:
			wallets = append(wallets, w.Writes()...)
			continue
		case *InvoiceWrites:
			if err := inv.add(w); err != nil {
				return err
			}
			continue
		}
		rest = append(rest, a)
	}
	var ins, upd []WalletWrite
	for _, w := range wallets {
		if w.PrevVersion == 0 {
			ins = append(ins, w)
		} else {
			upd = append(upd, w)
		}
	}
	nw, uw := walletArrays(ins), walletArrays(upd)
	prev := make(pq.Int64Array, len(upd))
	for i, w := range upd {
		prev[i] = w.PrevVersion
	}
	e := entryArrays(b.Entries)
	n := len(b.Processed)
	cID, cMerchant, cType := make(stringArray, n), make(stringArray, n), make(stringArray, n)
	cOffset, cReply := make(pq.Int64Array, n), make(textArray, n)
	for i, p := range b.Processed {
		cID[i], cMerchant[i], cType[i], cOffset[i], cReply[i] = p.CommandID, p.MerchantID, p.Type, p.Offset, p.Reply
	}
	n = len(b.Outbox)
	oID, oTopic, oKey, oMerchant, oBody := make(stringArray, n), make(stringArray, n), make(stringArray, n),
		make(stringArray, n), make(textArray, n)
	traced := false
	for i, o := range b.Outbox {
		oID[i], oTopic[i], oKey[i], oMerchant[i], oBody[i] = o.EventID, o.Topic, o.Key, o.MerchantID, o.Body
		traced = traced || o.TraceParent != ""
	}
	aKind, aRows, err := aggregateArrays(rest)
	if err != nil {
		return err
	}
	args := append(fence, b.At,
		nw.ids, nw.merchants, nw.currencies, nw.types, nw.labels, nw.disburse, nw.current, nw.available, nw.versions, nw.created, nw.updated,
		uw.ids, uw.current, uw.available, uw.versions, prev, uw.updated, uw.labels, uw.disburse,
		e.txn, e.cmd, e.merchant, e.account, e.wallet, e.currency, e.amount, e.running, e.transType, e.narrative,
		cID, cMerchant, cType, cPart, cOffset, cReply,
		oID, oTopic, oKey, oMerchant, oBody,
		aKind, aRows,
		inv.ids, inv.merchants, inv.states, inv.apiRefs, inv.checkoutRequests, inv.versions, inv.prevs, inv.data,
		inv.created, inv.updated)
	query := commitBatchesSQL
	if traced {
		// Only a commit with a traced event pays for the traceparents (0048).
		oTrace := make(stringArray, n)
		for i, o := range b.Outbox {
			oTrace[i] = o.TraceParent
		}
		query, args = commitTracedSQL, append(args, oTrace)
	}
	err = execTraced(ctx, db, query, len(b.Processed), args)
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		switch pqErr.Code {
		case "PS001":
			return ErrFenced
		case "PS002":
			return ErrStaleSnapshot
		}
	}
	if err != nil {
		return fmt.Errorf("batch: commit: %w", err)
	}
	return nil
}

// execTraced runs the commit statement, inside a client span when tracing is on:
// named for the commit function, counting the commands it commits and linked
// (through the engine's commit span in ctx) to each one's apply span.
func execTraced(ctx context.Context, db *sqlx.DB, query string, commands int, args []any) error {
	op := "paysvc_commit_batches_v3"
	if query == commitTracedSQL {
		op = "paysvc_commit_batches_v4"
	}
	ctx, span := tracing.BatchDBSpan(ctx, op, commands)
	stmt, err := prepared(ctx, db, query)
	if err == nil {
		_, err = stmt.ExecContext(ctx, args...)
	}
	// The SQLSTATE, not the driver's message: that may quote values.
	var pqErr *pq.Error
	if span != nil && errors.As(err, &pqErr) {
		span.SetAttributes(attribute.String("db.response.status_code", string(pqErr.Code)))
	}
	tracing.EndDB(span, err)
	return err
}

// CommitBatches writes the batches of several partitions (of one topic) in one
// transaction, with one call of paysvc_commit_batches_v3 as CommitBatch: every
// partition's fence and offset, then the batches' rows concatenated. It is
// CommitBatch for many partitions at the cost of one, and all or nothing: an error
// (ErrFenced, ErrStaleSnapshot or any other) means none of them was written, and
// does not say which batch caused it. A caller that must know commits them one by
// one with CommitBatch (the engine does, after a refused combined commit). The
// batches must share one time (At): the rows that take the commit's time (ledger
// entries, the aggregates') must show the time the engine put in their replies.
// One batch goes through CommitBatch.
func CommitBatches(ctx context.Context, db *sqlx.DB, bs []Batch) error {
	if len(bs) == 0 {
		return nil
	}
	if len(bs) == 1 {
		return CommitBatch(ctx, db, bs[0])
	}
	var all Batch
	pPart, pEpoch, pNext := make(pq.Int64Array, len(bs)), make(pq.Int64Array, len(bs)), make(pq.Int64Array, len(bs))
	cPart := pq.Int64Array{}
	for i, b := range bs {
		if b.Topic != bs[0].Topic || !b.At.Equal(bs[0].At) {
			return fmt.Errorf("batch: one commit needs one topic and one time (%s %s, %s %s)", bs[0].Topic, bs[0].At, b.Topic, b.At)
		}
		pPart[i], pEpoch[i], pNext[i] = int64(b.Partition), b.Epoch, b.NextOffset
		all.Wallets = append(all.Wallets, b.Wallets...)
		all.Entries = append(all.Entries, b.Entries...)
		all.Processed = append(all.Processed, b.Processed...)
		for range b.Processed {
			cPart = append(cPart, int64(b.Partition))
		}
		all.Outbox = append(all.Outbox, b.Outbox...)
		all.Aggregates = append(all.Aggregates, b.Aggregates...)
	}
	all.At = bs[0].At
	return execCommit(ctx, db, all, []any{bs[0].Topic, pPart, pEpoch, pNext}, cPart)
}

// paysvc_commit_batches_v3 (storage/functions/paysvc_commit_batches_v3.sql)
// commits one partition's batch or several: replies and outbox bodies as text[],
// invoices as column arrays.
const commitBatchesSQL = `SELECT paysvc_commit_batches_v3(` + commitParams + `)`

// commitTracedSQL is commitBatchesSQL with the outbox events' traceparents
// (storage/functions/paysvc_commit_batches_v4.sql).
const commitTracedSQL = `SELECT paysvc_commit_batches_v4(` + commitParams + `, $58)`

// commitParams are the parameters _v3 and _v4 share, in the order of their
// arguments (the casts name the types Postgres cannot infer from the driver).
const commitParams = `$1, $2::integer[], $3, $4, $5,
	$6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
	$17, $18, $19, $20, $21, $22, $23, $24,
	$25, $26, $27, $28, $29, $30, $31, $32, $33, $34,
	$35, $36, $37, $38::integer[], $39, $40,
	$41, $42, $43, $44, $45,
	$46, $47::jsonb[],
	$48, $49, $50, $51, $52, $53, $54, $55, $56, $57`

type walletCols struct {
	ids, merchants, currencies, types, labels, current, available, created, updated stringArray
	disburse                                                                        pq.BoolArray
	versions                                                                        pq.Int64Array
}

// walletArrays lays snapshots out as column arrays. Arrays are never nil: a nil
// slice would be sent as NULL, and cardinality(NULL) is NULL, not 0.
func walletArrays(ws []WalletWrite) walletCols {
	n := len(ws)
	c := walletCols{
		ids: make(stringArray, 0, n), merchants: make(stringArray, 0, n), currencies: make(stringArray, 0, n),
		types: make(stringArray, 0, n), labels: make(stringArray, 0, n), current: make(stringArray, 0, n),
		available: make(stringArray, 0, n), created: make(stringArray, 0, n), updated: make(stringArray, 0, n),
		disburse: make(pq.BoolArray, 0, n), versions: make(pq.Int64Array, 0, n),
	}
	for _, w := range ws {
		s := w.Row
		c.ids = append(c.ids, s.WalletID)
		c.merchants = append(c.merchants, s.MerchantID)
		c.currencies = append(c.currencies, s.Currency)
		c.types = append(c.types, s.WalletType)
		c.labels = append(c.labels, s.Label)
		c.disburse = append(c.disburse, s.CanDisburse)
		c.current = append(c.current, s.CurrentBalance.String())
		c.available = append(c.available, s.AvailableBalance.String())
		c.versions = append(c.versions, s.Version)
		c.created = append(c.created, s.CreatedAt.UTC().Format(time.RFC3339Nano))
		c.updated = append(c.updated, s.UpdatedAt.UTC().Format(time.RFC3339Nano))
	}
	return c
}

type entryCols struct {
	txn, cmd, merchant, account, wallet, currency, amount, running, transType, narrative stringArray
}

func entryArrays(es []EntryWrite) entryCols {
	n := len(es)
	c := entryCols{make(stringArray, n), make(stringArray, n), make(stringArray, n), make(stringArray, n),
		make(stringArray, n), make(stringArray, n), make(stringArray, n), make(stringArray, n),
		make(stringArray, n), make(stringArray, n)}
	for i, e := range es {
		c.txn[i], c.cmd[i], c.merchant[i], c.account[i] = e.TransactionID, e.CommandID, e.MerchantID, e.Account
		c.wallet[i], c.currency[i], c.amount[i], c.transType[i], c.narrative[i] = e.WalletID, e.Currency, e.Amount.String(), e.TransType, e.Narrative
		if e.RunningBalance != nil {
			c.running[i] = e.RunningBalance.String()
		}
	}
	return c
}

// ProcessedReplies returns the stored replies of those ids that were already
// applied, and the type of command each id was applied as: an id that arrives again
// as another type is another operation reusing the id, not a retry.
func ProcessedReplies(ctx context.Context, q sqlx.QueryerContext, ids []string) (map[string][]byte, map[string]string, error) {
	// Not prepared (prepared.go): a generic plan of "= ANY($1)" made while the table
	// is small is a sequential scan, kept as the table grows (measured: 2.7 ms a
	// call at 20,000 rows). Planned per call, it is always the primary key.
	rows, err := q.QueryxContext(ctx, processedRepliesSQL, pq.StringArray(ids))
	if err != nil {
		return nil, nil, fmt.Errorf("processed replies: %w", err)
	}
	defer rows.Close()
	out, types := map[string][]byte{}, map[string]string{}
	for rows.Next() {
		var id, typ string
		var reply []byte
		if err := rows.Scan(&id, &typ, &reply); err != nil {
			return nil, nil, err
		}
		out[id], types[id] = reply, typ
	}
	return out, types, rows.Err()
}

const processedRepliesSQL = `SELECT command_id, command_type, reply FROM processed_commands WHERE command_id = ANY($1)`

// ProcessedReply returns the stored reply of one of the merchant's commands.
func ProcessedReply(ctx context.Context, q sqlx.QueryerContext, merchantID, commandID string) ([]byte, bool, error) {
	_, reply, ok, err := ProcessedCommand(ctx, q, merchantID, commandID)
	return reply, ok, err
}

// ProcessedCommand returns the type and stored reply of one of the merchant's
// applied commands.
func ProcessedCommand(ctx context.Context, q sqlx.QueryerContext, merchantID, commandID string) (string, []byte, bool, error) {
	var row struct {
		Type  string `db:"command_type"`
		Reply []byte `db:"reply"`
	}
	err := sqlx.GetContext(ctx, q, &row, `SELECT command_type, reply FROM processed_commands WHERE command_id = $1 AND merchant_id = $2`, commandID, merchantID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil, false, nil
	}
	if err != nil {
		return "", nil, false, fmt.Errorf("processed reply: %w", err)
	}
	return row.Type, row.Reply, true, nil
}
