package storage

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// Delivery is one event to one webhook, with what is needed to send it.
type Delivery struct {
	EventID    string    `db:"event_id"`
	WebhookID  string    `db:"webhook_id"`
	MerchantID string    `db:"merchant_id"`
	Topic      string    `db:"topic"`
	Body       []byte    `db:"body"`
	Status     string    `db:"status"`
	Attempts   int       `db:"attempts"`
	CreatedAt  time.Time `db:"created_at"`
	UpdatedAt  time.Time `db:"updated_at"`
	LastStatus *int      `db:"last_status"`
	LastError  *string   `db:"last_error"`
	Endpoint   string    `db:"endpoint"`
	Challenge  string    `db:"challenge"`
	IsActive   bool      `db:"is_active"`
	// IncludeChallenge is the webhook's echo setting now (read for replays).
	IncludeChallenge bool   `db:"include_challenge"`
	AggKey           string `db:"agg_key"`
	Partition        int32  `db:"src_partition"`
	Offset           int64  `db:"src_offset"`

	// SigningSecret keys webhook-signature (the webhook's, read when sending).
	SigningSecret []byte `db:"signing_secret"`
	// PreviousSigningSecret signs too until PreviousSecretExpiresAt (the webhook's
	// rotation window; nil when none).
	PreviousSigningSecret   []byte     `db:"previous_signing_secret"`
	PreviousSecretExpiresAt *time.Time `db:"previous_secret_expires_at"`
	// TraceParent is the event's trace context when the delivery came straight
	// from the ingest; not stored, so a delivery claimed from the table (a retry,
	// a backlog) has none and is not traced.
	TraceParent string `db:"-"`
}

// Queue is the queue the delivery waits in.
func (d Delivery) Queue() QueueKey {
	return QueueKey{WebhookID: d.WebhookID, Topic: d.Topic, Partition: d.Partition, AggKey: d.AggKey}
}

// Subscribes says whether the webhook wants events of a topic.
func (w Webhook) Subscribes(topic string) bool {
	switch topic {
	case "collection_event":
		return w.CollectionEvent
	case "send_money_event":
		return w.SendMoneyEvent
	case "reversal_event":
		return w.ReversalEvent
	case "wallet_transfer_event":
		return w.WalletTransferEvent
	case "subscription_event":
		return w.SubscriptionEvent
	}
	return false
}

// MerchantWebhooks returns the webhooks of the given merchants, disabled ones too (the
// dispatcher reads them once per batch of events): an event a disabled webhook
// subscribes to is recorded and at once FAILED ("webhook is disabled"), so the merchant
// can list it and replay it after enabling the webhook again; nothing is sent.
func MerchantWebhooks(ctx context.Context, q sqlx.QueryerContext, merchantIDs []string) ([]Webhook, error) {
	var out []Webhook
	err := sqlx.SelectContext(ctx, q, &out, `SELECT `+webhookColumns+` FROM webhooks
		WHERE merchant_id = ANY($1)`, pq.StringArray(merchantIDs))
	return out, err
}

// QueueKey names a delivery queue: the deliveries of one aggregate's events (the
// event record key, read from one partition of one topic) to one webhook. They are
// sent in offset order, one at a time (migration 0015).
type QueueKey struct {
	WebhookID string `db:"webhook_id"`
	Topic     string `db:"topic"`
	Partition int32  `db:"src_partition"`
	AggKey    string `db:"agg_key"`
}

func (k QueueKey) less(o QueueKey) bool {
	if k.WebhookID != o.WebhookID {
		return k.WebhookID < o.WebhookID
	}
	if k.Topic != o.Topic {
		return k.Topic < o.Topic
	}
	if k.Partition != o.Partition {
		return k.Partition < o.Partition
	}
	return k.AggKey < o.AggKey
}

// queueArrays are the columns of sorted, distinct queue keys, for unnest: every
// transaction that locks several queue rows locks them in this order (Go's byte
// order, through WITH ORDINALITY, not the database's collation).
func queueArrays(keys []QueueKey) (pq.StringArray, pq.StringArray, pq.Int32Array, pq.StringArray) {
	keys = slices.Clone(keys)
	slices.SortFunc(keys, func(a, b QueueKey) int {
		switch {
		case a.less(b):
			return -1
		case b.less(a):
			return 1
		}
		return 0
	})
	keys = slices.Compact(keys)
	w, t, p, a := make(pq.StringArray, len(keys)), make(pq.StringArray, len(keys)), make(pq.Int32Array, len(keys)), make(pq.StringArray, len(keys))
	for i, k := range keys {
		w[i], t[i], p[i], a[i] = k.WebhookID, k.Topic, k.Partition, k.AggKey
	}
	return w, t, p, a
}

// NewDelivery is one event for one webhook, as the dispatcher read it.
type NewDelivery struct {
	EventID    string
	WebhookID  string
	MerchantID string
	Topic      string
	AggKey     string // the event record's key: its aggregate
	Partition  int32  // where the event was read, which orders one aggregate's events
	Offset     int64
	Body       []byte
	// TraceParent is the event record's trace context (not stored): the delivery
	// made straight from the ingest continues it (package tracing).
	TraceParent string
}

// QueueLease is one lease of a queue. Its ID is new with every lease (a sequence,
// migration 0050), so a holder whose lease ran out while it was slow can be told
// that the queue is no longer its own: FinishDeliveries neither goes on with nor
// gives back a queue leased to someone else since.
type QueueLease struct {
	Queue QueueKey
	ID    int64
}

// Inserted is what InsertDeliveries did: the deliveries that were new (a
// redelivered event's are not), and the queues it created leased to the caller,
// which must send their new deliveries as it sends a claim's.
type Inserted struct {
	New    []NewDelivery
	Leased []QueueLease
}

// InsertDeliveries records deliveries in one transaction. A delivery already
// recorded (a redelivered event) is ignored. A queue that exists (deliveries in
// flight, or an earlier event of the aggregate waiting for its retry) is left as it
// is: its new deliveries wait their turn. A queue that did not exist is created,
// leased to the caller for leaseFor if it is among the first lease queues (in key
// order), due now otherwise. Each new queue's lease gets an id of its own.
func InsertDeliveries(ctx context.Context, db *sqlx.DB, ds []NewDelivery, lease int, leaseFor time.Duration) (Inserted, error) {
	return InsertDeliveriesAs(ctx, db, ds, lease, leaseFor, 0)
}

// NewLeaseToken draws a lease id for InsertDeliveriesAs.
func NewLeaseToken(ctx context.Context, db *sqlx.DB) (int64, error) {
	var id int64
	if err := sqlx.GetContext(ctx, db, &id, `SELECT nextval('webhook_queue_leases')`); err != nil {
		return 0, fmt.Errorf("lease token: %w", err)
	}
	return id, nil
}

// InsertDeliveriesAs is InsertDeliveries with the queues it creates leased under
// token (from NewLeaseToken; 0 draws an id per queue), so that a caller that never
// heard the answer (the connection dropped after the commit) can call again with
// the same token: a queue still leased under it is one the unanswered call created
// and nobody holds, and it is made due now, for a claim to take at once, instead of
// sitting out its lease with nobody sending it.
func InsertDeliveriesAs(ctx context.Context, db *sqlx.DB, ds []NewDelivery, lease int, leaseFor time.Duration, token int64) (Inserted, error) {
	var out Inserted
	if len(ds) == 0 {
		return out, nil
	}
	keys := make([]QueueKey, len(ds))
	for i, d := range ds {
		keys[i] = d.queue()
	}
	qw, qt, qp, qa := queueArrays(keys)
	n := len(ds)
	ev, wh, me, to, ag := make(pq.StringArray, n), make(pq.StringArray, n), make(pq.StringArray, n), make(pq.StringArray, n), make(pq.StringArray, n)
	pa, of, bo := make(pq.Int32Array, n), make(pq.Int64Array, n), make(pq.ByteaArray, n)
	for i, d := range ds {
		ev[i], wh[i], me[i], to[i], ag[i], pa[i], of[i], bo[i] = d.EventID, d.WebhookID, d.MerchantID, d.Topic, d.AggKey, d.Partition, d.Offset, d.Body
	}
	// One statement, so one round trip and its own transaction. Queues first, in key
	// order (as every writer locks them): the deliveries' insert waits for the
	// queues' (count(*) reads them all). The no-op update locks an existing row, so
	// this waits for a sender that is deleting it as empty, and then inserts it
	// afresh; xmax = 0 marks a row this statement inserted.
	var rows []struct {
		Kind      string         `db:"kind"`
		WebhookID string         `db:"webhook_id"`
		Topic     sql.NullString `db:"topic"`
		Partition sql.NullInt32  `db:"src_partition"`
		AggKey    sql.NullString `db:"agg_key"`
		EventID   sql.NullString `db:"event_id"`
		LeaseID   sql.NullInt64  `db:"lease_id"`
	}
	if err := sqlx.SelectContext(ctx, db, &rows, `WITH q AS (
			INSERT INTO webhook_queues (webhook_id, topic, src_partition, agg_key, next_attempt_at, lease_id)
			SELECT w, t, p, a, CASE WHEN i <= $5 THEN now() + $6 * interval '1 millisecond' ELSE now() END,
				CASE WHEN $15::bigint = 0 THEN nextval('webhook_queue_leases') ELSE $15::bigint END
			FROM unnest($1::text[], $2::text[], $3::int[], $4::text[]) WITH ORDINALITY AS q(w, t, p, a, i) ORDER BY i
			ON CONFLICT (webhook_id, topic, src_partition, agg_key) DO UPDATE SET next_attempt_at =
				CASE WHEN $15::bigint <> 0 AND webhook_queues.lease_id = $15::bigint THEN least(webhook_queues.next_attempt_at, now())
				ELSE webhook_queues.next_attempt_at END
			RETURNING webhook_id, topic, src_partition, agg_key, lease_id, xmax = 0 AND next_attempt_at > now() AS leased),
		d AS (
			INSERT INTO webhook_deliveries (event_id, webhook_id, merchant_id, topic, agg_key, src_partition, src_offset, body)
			SELECT * FROM unnest($7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::int[], $13::bigint[], $14::bytea[])
			WHERE (SELECT count(*) FROM q) >= 0
			ON CONFLICT DO NOTHING
			RETURNING event_id, webhook_id)
		SELECT 'queue' AS kind, webhook_id, topic, src_partition, agg_key, NULL AS event_id, lease_id FROM q WHERE leased
		UNION ALL
		SELECT 'delivery', webhook_id, NULL, NULL, NULL, event_id, NULL FROM d`,
		qw, qt, qp, qa, lease, leaseFor.Milliseconds(), ev, wh, me, to, ag, pa, of, bo, token); err != nil {
		return out, fmt.Errorf("insert deliveries: %w", err)
	}
	isNew := map[[2]string]bool{}
	for _, r := range rows {
		if r.Kind == "queue" {
			out.Leased = append(out.Leased, QueueLease{Queue: QueueKey{WebhookID: r.WebhookID, Topic: r.Topic.String,
				Partition: r.Partition.Int32, AggKey: r.AggKey.String}, ID: r.LeaseID.Int64})
		} else {
			isNew[[2]string{r.EventID.String, r.WebhookID}] = true
		}
	}
	for _, d := range ds {
		if isNew[[2]string{d.EventID, d.WebhookID}] {
			out.New = append(out.New, d)
		}
	}
	return out, nil
}

func (d NewDelivery) queue() QueueKey {
	return QueueKey{WebhookID: d.WebhookID, Topic: d.Topic, Partition: d.Partition, AggKey: d.AggKey}
}

// Claimed is a leased queue and its unfinished deliveries, oldest first.
type Claimed struct {
	Queue      QueueKey
	LeaseID    int64 // QueueLease.ID
	Deliveries []Delivery
}

// Lease is the claim's lease.
func (c Claimed) Lease() QueueLease { return QueueLease{Queue: c.Queue, ID: c.LeaseID} }

// ClaimQueues leases up to limit due queues for lease and returns up to perQueue of
// each one's unfinished deliveries in offset order. A due queue with nothing left is
// deleted. While leased, a queue is claimed by no one else; a dispatcher that dies
// lets its leases run out. Deliveries stay PENDING while their queue is leased; the
// dispatcher marks each PROCESSING just before its first attempt (MarkProcessing).
func ClaimQueues(ctx context.Context, db *sqlx.DB, lease time.Duration, limit, perQueue int) ([]Claimed, error) {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	var keys []QueueKey
	if err := sqlx.SelectContext(ctx, tx, &keys, `SELECT webhook_id, topic, src_partition, agg_key FROM webhook_queues
		WHERE next_attempt_at <= now() ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED`, limit); err != nil {
		return nil, fmt.Errorf("claim queues: %w", err)
	}
	out, err := takeChains(ctx, tx, keys, lease, perQueue)
	if err != nil {
		return nil, err
	}
	return out, tx.Commit()
}

// takeChains reads, for queues the transaction has locked, up to perQueue unfinished
// deliveries each, leases the queues that have some and deletes the others. It must
// be its own statement after the lock: its snapshot then sees every delivery whose
// insert committed before the lock, and a later insert waits for the transaction.
func takeChains(ctx context.Context, tx *sqlx.Tx, keys []QueueKey, lease time.Duration, perQueue int) ([]Claimed, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	qw, qt, qp, qa := queueArrays(keys)
	var rows []Delivery
	if err := sqlx.SelectContext(ctx, tx, &rows, `SELECT d.event_id, d.webhook_id, d.merchant_id, d.topic, d.body, d.status,
			d.attempts, d.created_at, d.updated_at, d.last_status, d.last_error, d.agg_key, d.src_partition, d.src_offset,
			w.endpoint, w.challenge, w.signing_secret, w.is_active, w.include_challenge,
			w.previous_signing_secret, w.previous_secret_expires_at
		FROM unnest($1::text[], $2::text[], $3::int[], $4::text[]) AS q(webhook_id, topic, src_partition, agg_key)
		CROSS JOIN LATERAL (SELECT * FROM webhook_deliveries x
			WHERE x.webhook_id = q.webhook_id AND x.topic = q.topic AND x.src_partition = q.src_partition AND x.agg_key = q.agg_key
				AND x.status IN ('PENDING', 'PROCESSING')
			ORDER BY x.src_offset LIMIT $5) d
		JOIN webhooks w ON w.webhook_id = d.webhook_id`, qw, qt, qp, qa, perQueue); err != nil {
		return nil, fmt.Errorf("queued deliveries: %w", err)
	}
	byKey := map[QueueKey][]Delivery{}
	for _, d := range rows {
		byKey[d.Queue()] = append(byKey[d.Queue()], d)
	}
	var out []Claimed
	var empty, leased []QueueKey
	for _, k := range keys {
		ds := byKey[k]
		if len(ds) == 0 {
			empty = append(empty, k)
			continue
		}
		slices.SortFunc(ds, func(a, b Delivery) int { return cmp.Compare(a.Offset, b.Offset) })
		out = append(out, Claimed{Queue: k, Deliveries: ds})
		leased = append(leased, k)
	}
	if len(empty)+len(leased) > 0 {
		ew, et, ep, ea := queueArrays(empty)
		lw, lt, lp, la := queueArrays(leased)
		var ids []struct {
			QueueKey
			LeaseID int64 `db:"lease_id"`
		}
		if err := sqlx.SelectContext(ctx, tx, &ids, `WITH gone AS (
				DELETE FROM webhook_queues q USING unnest($1::text[], $2::text[], $3::int[], $4::text[]) AS e(w, t, p, a)
				WHERE q.webhook_id = e.w AND q.topic = e.t AND q.src_partition = e.p AND q.agg_key = e.a)
			UPDATE webhook_queues q SET next_attempt_at = now() + $9 * interval '1 millisecond',
				lease_id = nextval('webhook_queue_leases')
			FROM unnest($5::text[], $6::text[], $7::int[], $8::text[]) AS l(w, t, p, a)
			WHERE q.webhook_id = l.w AND q.topic = l.t AND q.src_partition = l.p AND q.agg_key = l.a
			RETURNING q.webhook_id, q.topic, q.src_partition, q.agg_key, q.lease_id`,
			ew, et, ep, ea, lw, lt, lp, la, lease.Milliseconds()); err != nil {
			return nil, fmt.Errorf("lease or delete queues: %w", err)
		}
		byQueue := make(map[QueueKey]int64, len(ids))
		for _, r := range ids {
			byQueue[r.QueueKey] = r.LeaseID
		}
		for i := range out {
			out[i].LeaseID = byQueue[out[i].Queue]
		}
	}
	return out, nil
}

// Outcome is what became of one claimed delivery.
type Outcome struct {
	EventID   string
	WebhookID string
	// Status is DELIVERED, FAILED or PROCESSING (attempted, due again at Next). When
	// not Attempted, the delivery is released for the next claim of its queue with
	// its status untouched (statuses never go back: PENDING -> PROCESSING ->
	// DELIVERED or FAILED).
	Status     string
	Next       time.Time
	Attempted  bool // counts as an attempt: attempts + 1, last status and error set
	Recorded   bool // an HTTP attempt was made: a webhook_attempts row
	HTTPStatus *int
	Error      *string
	Latency    time.Duration
	Signed     Signed // the signature headers the attempt sent (when Recorded)
}

// Signed is the Standard Webhooks headers one attempt sent, as sent: the merchant's
// console shows them beside the attempt (migration 0052). Empty when no request
// went out.
type Signed struct {
	ID        string `db:"signed_id"`        // webhook-id
	Timestamp string `db:"signed_timestamp"` // webhook-timestamp
	Signature string `db:"signature"`        // webhook-signature
}

// SignedOf picks the signature headers out of a request's headers.
func SignedOf(h map[string]string) Signed {
	return Signed{ID: h["webhook-id"], Timestamp: h["webhook-timestamp"], Signature: h["webhook-signature"]}
}

// nullText is "" as NULL: an attempt without a header stores none.
func nullText(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// QueueNext is when a leased queue is due again.
type QueueNext struct {
	Queue   QueueKey
	LeaseID int64 // the lease given back
	Next    time.Time
}

// FailureCount changes a webhook's consecutive failures after a batch of attempts:
// Reset when one of them succeeded (the count restarts from the failures after the
// last success), Add failed attempts.
type FailureCount struct {
	WebhookID string
	Reset     bool
	Add       int
}

// Finish is a batch of outcomes for FinishDeliveries.
type Finish struct {
	Outcomes []Outcome
	Due      []QueueNext    // leased queues given back, due again at Next
	Continue []QueueLease   // leased queues kept: their next deliveries are returned, or they are deleted if none is left
	Failures []FailureCount // consecutive failures of the webhooks attempted
	Lease    time.Duration  // for the queues kept
	PerQueue int
}

// Finished is what FinishDeliveries did: the webhooks' failure counts after the
// batch (of those that changed), and the next deliveries of the queues kept.
type Finished struct {
	Failures map[string]int
	Next     []Claimed
	// Lost counts the queues given back or kept that were leased to someone else
	// since: the lease ran out before the outcomes were written.
	Lost int
}

// FinishDeliveries stores a batch in one transaction: the outcomes of leased
// deliveries (with their attempts), the webhooks' consecutive failure counts, and
// what follows for each leased queue (due again at a time, or kept with its next
// deliveries, or deleted when it has none left).
//
// A queue is only given back or kept under the lease named: one leased to another
// dispatcher since (this one's lease ran out) is left to that one, which sends
// whatever this one did not finish, so a slow dispatcher never sends an aggregate's
// later events beside another one's earlier. A queue that no longer exists is made
// due again at Next (now for a kept one), so a delivery left unfinished always has
// a queue. An outcome never moves a delivery out of DELIVERED or FAILED.
// outcomeArrays are outcomes as the columns FinishDeliveries' statement unnests.
type outcomeArrays struct {
	ev, wh, st    pq.StringArray
	nx            []time.Time
	at, rec       pq.BoolArray
	hs            []sql.NullInt64
	er            []sql.NullString
	lat           pq.Int64Array
	sid, sts, sig []sql.NullString
}

// dueArrays are the queues given back (in key order) with when each is due and,
// for one that still exists, the lease id we hold (the upsert updates only ours).
func dueArrays(next map[QueueKey]time.Time, exists map[QueueKey]bool, held map[QueueKey]int64) (
	pq.StringArray, pq.StringArray, pq.Int32Array, pq.StringArray, []time.Time, pq.Int64Array) {
	dk := make([]QueueKey, 0, len(next))
	for k := range next {
		dk = append(dk, k)
	}
	dw, dt, dp, da := queueArrays(dk)
	dts, dl := make([]time.Time, len(dw)), make(pq.Int64Array, len(dw))
	for i := range dw {
		k := QueueKey{dw[i], dt[i], dp[i], da[i]}
		dts[i] = next[k]
		if exists[k] {
			dl[i] = held[k] // ours: the upsert updates it
		}
	}
	return dw, dt, dp, da, dts, dl
}

// failureArrays are the webhooks' failure counts in webhook id order (the order
// every writer locks them in), as columns.
func failureArrays(fs []FailureCount) (pq.StringArray, pq.BoolArray, pq.Int64Array) {
	fails := slices.Clone(fs)
	slices.SortFunc(fails, func(a, b FailureCount) int { return cmp.Compare(a.WebhookID, b.WebhookID) })
	fid, freset, fadd := make(pq.StringArray, len(fails)), make(pq.BoolArray, len(fails)), make(pq.Int64Array, len(fails))
	for i, x := range fails {
		fid[i], freset[i], fadd[i] = x.WebhookID, x.Reset, int64(x.Add)
	}
	return fid, freset, fadd
}

func outcomeArraysOf(os []Outcome) outcomeArrays {
	n := len(os)
	a := outcomeArrays{ev: make(pq.StringArray, n), wh: make(pq.StringArray, n), st: make(pq.StringArray, n),
		nx: make([]time.Time, n), at: make(pq.BoolArray, n), rec: make(pq.BoolArray, n),
		hs: make([]sql.NullInt64, n), er: make([]sql.NullString, n), lat: make(pq.Int64Array, n),
		sid: make([]sql.NullString, n), sts: make([]sql.NullString, n), sig: make([]sql.NullString, n)}
	for i, o := range os {
		a.ev[i], a.wh[i], a.st[i], a.nx[i], a.at[i], a.rec[i], a.lat[i] = o.EventID, o.WebhookID, o.Status, o.Next, o.Attempted, o.Recorded, o.Latency.Milliseconds()
		a.sid[i], a.sts[i], a.sig[i] = nullText(o.Signed.ID), nullText(o.Signed.Timestamp), nullText(o.Signed.Signature)
		if o.HTTPStatus != nil {
			a.hs[i] = sql.NullInt64{Int64: int64(*o.HTTPStatus), Valid: true}
		}
		if o.Error != nil {
			a.er[i] = sql.NullString{String: *o.Error, Valid: true}
		}
	}
	return a
}

func FinishDeliveries(ctx context.Context, db *sqlx.DB, f Finish) (Finished, error) {
	var res Finished
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return res, err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	held := map[QueueKey]int64{}
	var all []QueueKey
	for _, q := range f.Continue {
		all = append(all, q.Queue)
		held[q.Queue] = q.ID
	}
	for _, q := range f.Due {
		all = append(all, q.Queue)
		held[q.Queue] = q.LeaseID
	}
	// Queue rows first, in key order: a delivery row is written only by the holder
	// of its queue's lock, so no two writers wait on each other in a cycle.
	qw, qt, qp, qa := queueArrays(all)
	var rowsNow []struct {
		QueueKey
		LeaseID int64 `db:"lease_id"`
	}
	if err := sqlx.SelectContext(ctx, tx, &rowsNow, `SELECT q.webhook_id, q.topic, q.src_partition, q.agg_key, q.lease_id FROM webhook_queues q
		JOIN unnest($1::text[], $2::text[], $3::int[], $4::text[]) WITH ORDINALITY AS l(w, t, p, a, i)
			ON q.webhook_id = l.w AND q.topic = l.t AND q.src_partition = l.p AND q.agg_key = l.a
		ORDER BY l.i FOR UPDATE OF q`, qw, qt, qp, qa); err != nil {
		return res, fmt.Errorf("lock queues: %w", err)
	}
	exists := make(map[QueueKey]bool, len(rowsNow))
	stolen := map[QueueKey]bool{}
	for _, r := range rowsNow {
		exists[r.QueueKey] = true
		if r.LeaseID != held[r.QueueKey] {
			stolen[r.QueueKey] = true
		}
	}
	next := map[QueueKey]time.Time{}
	var keep []QueueKey
	for _, q := range f.Continue {
		switch {
		case stolen[q.Queue]:
		case exists[q.Queue]:
			keep = append(keep, q.Queue)
		default:
			next[q.Queue] = time.Now()
		}
	}
	for _, q := range f.Due {
		if !stolen[q.Queue] {
			next[q.Queue] = q.Next
		}
	}
	res.Lost = len(stolen)
	oa := outcomeArraysOf(f.Outcomes)
	fid, freset, fadd := failureArrays(f.Failures)
	dw, dt, dp, da, dts, dl := dueArrays(next, exists, held)
	// One statement: the outcomes, their attempts, the webhooks' consecutive failures
	// (locked in id order first: two dispatchers' batches share webhooks; a count
	// that would not change is not written), and the queues given back: ours (locked
	// above, lease id given) updated; one that went away meanwhile inserted with a
	// fresh lease id, unless a dispatcher's ingest made it again meanwhile (then
	// that one holds it: the update's lease ids differ).
	rows, err := tx.QueryxContext(ctx, `WITH o AS (
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::bool[], $6::int[], $7::text[], $8::bool[], $9::int[],
					$19::text[], $20::text[], $21::text[])
				AS o(event_id, webhook_id, status, next, attempted, http_status, error, recorded, latency_ms, signed_id, signed_timestamp, signature)),
		finished AS (
			UPDATE webhook_deliveries d SET status = CASE WHEN o.attempted THEN o.status ELSE d.status END, next_attempt_at = o.next,
				attempts = d.attempts + CASE WHEN o.attempted THEN 1 ELSE 0 END,
				last_status = CASE WHEN o.attempted THEN o.http_status ELSE d.last_status END,
				last_error = CASE WHEN o.attempted THEN o.error ELSE d.last_error END, updated_at = now()
			FROM o WHERE d.event_id = o.event_id AND d.webhook_id = o.webhook_id AND d.status IN ('PENDING', 'PROCESSING')),
		attempted AS (
			INSERT INTO webhook_attempts (event_id, webhook_id, http_status, latency_ms, error, replay, signed_id, signed_timestamp, signature)
			SELECT event_id, webhook_id, http_status, latency_ms, error, false, signed_id, signed_timestamp, signature FROM o WHERE recorded),
		due AS (
			INSERT INTO webhook_queues (webhook_id, topic, src_partition, agg_key, next_attempt_at, lease_id)
			SELECT w, t, p, a, n, CASE WHEN l = 0 THEN nextval('webhook_queue_leases') ELSE l END
			FROM unnest($13::text[], $14::text[], $15::int[], $16::text[], $17::timestamptz[], $18::bigint[])
				WITH ORDINALITY AS q(w, t, p, a, n, l, i) ORDER BY i
			ON CONFLICT (webhook_id, topic, src_partition, agg_key) DO UPDATE SET next_attempt_at = excluded.next_attempt_at
				WHERE webhook_queues.lease_id = excluded.lease_id),
		locked AS (
			SELECT w.webhook_id FROM webhooks w WHERE w.webhook_id = ANY($10) ORDER BY w.webhook_id FOR NO KEY UPDATE)
		UPDATE webhooks w SET failures_count = CASE WHEN f.reset THEN f.add ELSE w.failures_count + f.add END, updated_at = now()
		FROM unnest($10::text[], $11::bool[], $12::int[]) AS f(id, reset, add), locked
		WHERE w.webhook_id = f.id AND locked.webhook_id = f.id AND (f.add > 0 OR w.failures_count <> 0)
		RETURNING w.webhook_id, w.failures_count`,
		oa.ev, oa.wh, oa.st, pq.Array(oa.nx), oa.at, pq.Array(oa.hs), pq.Array(oa.er), oa.rec, oa.lat,
		fid, freset, fadd, dw, dt, dp, da, pq.Array(dts), dl, pq.Array(oa.sid), pq.Array(oa.sts), pq.Array(oa.sig))
	if err != nil {
		return res, fmt.Errorf("finish deliveries: %w", err)
	}
	res.Failures = map[string]int{}
	for rows.Next() {
		var id string
		var c int
		if err := rows.Scan(&id, &c); err != nil {
			rows.Close()
			return res, err
		}
		res.Failures[id] = c
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return res, fmt.Errorf("finish deliveries: %w", err)
	}
	if res.Next, err = takeChains(ctx, tx, keep, f.Lease, f.PerQueue); err != nil {
		return res, err
	}
	return res, tx.Commit()
}

// RecordAttempt stores one attempt (a replay's) with the signature headers it sent.
func RecordAttempt(ctx context.Context, ext sqlx.ExtContext, eventID, webhookID string, status *int, latency time.Duration, errText *string,
	replay bool, signed Signed) error {
	_, err := ext.ExecContext(ctx, `INSERT INTO webhook_attempts (event_id, webhook_id, http_status, latency_ms, error, replay,
			signed_id, signed_timestamp, signature)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, eventID, webhookID, status, latency.Milliseconds(), errText, replay,
		nullText(signed.ID), nullText(signed.Timestamp), nullText(signed.Signature))
	return err
}

// RecordReplay records a replay attempt and ends the replay's lease (StartReplay).
// The record takes the replay's outcome: DELIVERED when the endpoint accepted it
// (a pending retry of it then need not be sent); FAILED when it did not and the
// delivery was finished (DELIVERED or FAILED: its latest delivery failed, as Svix
// shows a resent message); unchanged (PROCESSING) when it did not and the dispatcher
// still has the delivery queued for a retry. The last HTTP status and error are the
// replay's, and so are the signature headers recorded with the attempt. The event
// record itself stays the same.
func RecordReplay(ctx context.Context, db *sqlx.DB, eventID, webhookID string, status *int, latency time.Duration, errText *string,
	delivered bool, signed Signed) error {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := RecordAttempt(ctx, tx, eventID, webhookID, status, latency, errText, true, signed); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET replaying_until = NULL, updated_at = now(),
			status = CASE WHEN $3 THEN 'DELIVERED' WHEN status IN ('DELIVERED', 'FAILED') THEN 'FAILED' ELSE status END,
			last_status = $4, last_error = $5
		WHERE event_id = $1 AND webhook_id = $2`, eventID, webhookID, delivered, status, errText); err != nil {
		return err
	}
	return tx.Commit()
}

// DisableWebhook turns a webhook off (its failure threshold was reached).
func DisableWebhook(ctx context.Context, ext sqlx.ExtContext, webhookID string) error {
	_, err := ext.ExecContext(ctx, `UPDATE webhooks SET is_active = false, updated_at = now() WHERE webhook_id = $1`, webhookID)
	return err
}

// ListDeliveries returns one page of the merchant's delivery records, newest first,
// filtered by topic and status when given, and the total. Both are read in one
// snapshot (ReadSnapshot), so they agree.
func ListDeliveries(ctx context.Context, db *sqlx.DB, merchantID, topic, status string, since time.Time, limit, offset int) ([]Delivery, int, error) {
	where := `d.merchant_id = $1 AND ($2 = '' OR d.topic = $2) AND ($3 = '' OR ` + shownStatus + ` = $3) AND d.created_at >= $4`
	var total int
	out := []Delivery{}
	err := ReadSnapshot(ctx, db, func(tx *sqlx.Tx) error {
		if err := sqlx.GetContext(ctx, tx, &total, `SELECT count(*) FROM webhook_deliveries d WHERE `+where, merchantID, topic, status, since); err != nil {
			return fmt.Errorf("count deliveries: %w", err)
		}
		if err := sqlx.SelectContext(ctx, tx, &out, `SELECT `+listedDelivery+` FROM webhook_deliveries d JOIN webhooks w USING (webhook_id)
			WHERE `+where+` ORDER BY d.created_at DESC, d.event_id DESC, d.webhook_id LIMIT $5 OFFSET $6`,
			merchantID, topic, status, since, limit, offset); err != nil {
			return fmt.Errorf("list deliveries: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return out, total, nil
}

// listedDelivery is a delivery as lists read it: without the webhook's secrets.
const listedDelivery = `d.event_id, d.webhook_id, d.merchant_id, d.topic, d.body, ` + shownStatus + ` AS status,
	d.attempts, d.created_at, d.updated_at, d.last_status, d.last_error, w.endpoint, '' AS challenge, NULL::bytea AS signing_secret,
	w.is_active`

// shownStatus is a delivery's status as the API shows it: PROCESSING while a replay
// is in flight (replaying_until, migration 0023), its stored status otherwise.
const shownStatus = `CASE WHEN d.replaying_until > now() THEN 'PROCESSING' ELSE d.status END`

// EventDeliveries returns the merchant's deliveries of one event, with secrets and the
// webhook's echo setting, for replay.
func EventDeliveries(ctx context.Context, q sqlx.QueryerContext, merchantID, eventID string) ([]Delivery, error) {
	var out []Delivery
	err := sqlx.SelectContext(ctx, q, &out, `SELECT d.event_id, d.webhook_id, d.merchant_id, d.topic, d.body, `+shownStatus+` AS status,
		d.attempts, d.created_at, d.updated_at, d.last_status, d.last_error, w.endpoint, w.challenge, w.signing_secret, w.is_active,
		w.include_challenge, w.previous_signing_secret, w.previous_secret_expires_at
		FROM webhook_deliveries d JOIN webhooks w USING (webhook_id) WHERE d.merchant_id = $1 AND d.event_id = $2`,
		merchantID, eventID)
	return out, err
}

// StartReplay marks a delivery as being replayed until now+lease: the API shows it
// PROCESSING meanwhile (whatever its stored status), and a PENDING one becomes
// PROCESSING for good (a delivery has now been attempted; if the replay's answer is
// never recorded, its queue still sends it). It reports false when the delivery is
// gone (pruned, or its webhook deleted).
func StartReplay(ctx context.Context, ext sqlx.ExtContext, eventID, webhookID string, lease time.Duration) (bool, error) {
	res, err := ext.ExecContext(ctx, `UPDATE webhook_deliveries SET replaying_until = now() + $3 * interval '1 millisecond',
		status = CASE WHEN status = 'PENDING' THEN 'PROCESSING' ELSE status END, updated_at = now()
		WHERE event_id = $1 AND webhook_id = $2`, eventID, webhookID, lease.Milliseconds())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// MarkProcessing moves deliveries the dispatcher is about to attempt for the first
// time from PENDING to PROCESSING, in one statement; a delivery that is no longer
// PENDING (a replay took it, or it is finished) is left as it is.
func MarkProcessing(ctx context.Context, ext sqlx.ExtContext, keys [][2]string) error {
	ev, wh := make(pq.StringArray, len(keys)), make(pq.StringArray, len(keys))
	for i, k := range keys {
		ev[i], wh[i] = k[0], k[1]
	}
	_, err := ext.ExecContext(ctx, `UPDATE webhook_deliveries d SET status = 'PROCESSING', updated_at = now()
		FROM unnest($1::text[], $2::text[]) AS k(event_id, webhook_id)
		WHERE d.event_id = k.event_id AND d.webhook_id = k.webhook_id AND d.status = 'PENDING'`, ev, wh)
	return err
}
