package relay_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"paysvc/actors/outbound/relay"
	"paysvc/actors/values/waittest"
	"paysvc/storage"
	"paysvc/storage/storagetest"
	"paysvc/topics"
	"paysvc/topics/kafkatest"
)

// eventTopic is the Kafka topic every test row goes to.
var eventTopic = topics.EventTopics[topics.WalletTransferEvent]

// relayLockClass mirrors the advisory-lock class in relay.go (leaderLock); the
// second key is hashtext(schema).
const relayLockClass = 7_316_420

func testLogger() *slog.Logger {
	if os.Getenv("PAYSVC_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// kafka is the Kafka of one test: its bootstrap brokers, the namespace of its
// topics, and the kfake cluster when the test has one of its own.
type kafka struct {
	brokers []string
	ns      topics.Namespace
	fake    *kfake.Cluster // nil on the real cluster
}

// newKafka is the test's Kafka (kafkatest.Cluster: the shared real cluster in a
// fresh namespace, or a single-broker kfake) with every paysvc topic, created
// with topics.EnsureTopics: neither broker creates a topic a producer names.
func newKafka(t *testing.T) *kafka {
	t.Helper()
	brokers, ns := kafkatest.Cluster(t, kfake.NumBrokers(1))
	k := &kafka{brokers: brokers, ns: ns}
	k.ensureTopics(t)
	return k
}

// newFakeKafka is a kfake cluster of the test's own whatever kafkatest.Real says,
// started with opts (default one broker) and without topics: for a test that
// injects a fault only kfake can (each caller says which).
func newFakeKafka(t *testing.T, opts ...kfake.Opt) *kafka {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &kafka{brokers: c.ListenAddrs(), fake: c}
}

// ensureTopics creates every paysvc topic in the namespace (2 command
// partitions) and waits until every broker knows them (kafkatest.KnownToEveryBroker). The
// bound is generous: a busy machine's KRaft controller can take tens of seconds
// to create a dozen topics.
func (k *kafka) ensureTopics(t *testing.T) {
	t.Helper()
	adm := k.client(t)
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := topics.EnsureTopics(ctx, adm, k.ns, 2); err != nil {
		t.Fatal(err)
	}
	if err := kafkatest.KnownToEveryBroker(ctx, adm, k.ns.Topics(topics.AllTopics()...)); err != nil {
		t.Fatal(err)
	}
}

// client is a plain client of the cluster, for the test's own questions to it
// (creating topics, listing them, their end offsets); the caller closes it.
func (k *kafka) client(t *testing.T) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.brokers...))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// eventTopic is the name on the cluster of the topic every test row goes to.
func (k *kafka) eventTopic() string { return k.ns.Topic(eventTopic) }

// newProducer is the relay's client as the service makes it (relay.NewClient), plus
// any test options.
func newProducer(t *testing.T, k *kafka, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := relay.NewClient(k.brokers, "paysvc-relay-test", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// ownPool is a connection pool of its own to the test's schema, for a relay that
// must not share the test's (or another relay's) connections; it closes with the
// test.
func ownPool(t *testing.T, url string) *sqlx.DB {
	t.Helper()
	db, err := storage.Open(context.Background(), url, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// startRelay runs a relay of the test's namespace until the returned stop is
// called or the test ends; stop waits for Run to return.
func startRelay(t *testing.T, k *kafka, db *sqlx.DB, cl *kgo.Client) (*relay.Relay, func()) {
	t.Helper()
	r := relay.New(db, cl, k.ns, testLogger(), 0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("relay Run returned %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("relay Run did not return within 5s of cancel")
			}
		})
	}
	t.Cleanup(stop)
	return r, stop
}

// outboxRow is one inserted event as stored.
type outboxRow struct {
	OutboxID int64
	EventID  string
	Key      string
	Merchant string
	Body     []byte
}

// testRow is the i-th event of a test's rows: record keys cycling over three
// aggregates, merchants over two, and a distinct, byte-exact JSON body.
func testRow(prefix string, i int) outboxRow {
	r := outboxRow{
		EventID:  fmt.Sprintf("%s-evt-%05d", prefix, i),
		Key:      fmt.Sprintf("wal_%s_%d", prefix, i%3),
		Merchant: fmt.Sprintf("mer_%s_%d", prefix, i%2),
	}
	// Unusual spacing and non-ASCII bytes: the relay must send these bytes, not
	// a re-encoding of them.
	r.Body = fmt.Appendf(nil, "{\"id\": %q,  \"seq\":%d, \"key\" : %q, \"note\":\"caf\u00e9 \\u00fc %x\"}\n", r.EventID, i, r.Key, i*7919)
	return r
}

// insertRows writes n outbox rows in one transaction, in order, with record keys
// cycling over three aggregates and distinct, byte-exact JSON bodies.
func insertRows(t *testing.T, db *sqlx.DB, prefix string, n int) []outboxRow {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	rows := make([]outboxRow, n)
	for i := range rows {
		r := testRow(prefix, i)
		if err := tx.QueryRowxContext(ctx, `INSERT INTO outbox (event_id, topic, record_key, merchant_id, body)
			VALUES ($1, $2, $3, $4, $5) RETURNING outbox_id`, r.EventID, eventTopic, r.Key, r.Merchant, r.Body).Scan(&r.OutboxID); err != nil {
			t.Fatal(err)
		}
		rows[i] = r
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// insertCommitRow writes n events as one outbox row, as an engine commit does
// (migration 0036), with the bodies insertRows would give them; huge, if >= 0, is
// the index of an event whose body is too large for the broker.
func insertCommitRow(t *testing.T, db *sqlx.DB, prefix string, n, huge int) []outboxRow {
	t.Helper()
	rows := make([]outboxRow, n)
	var ids, keys, merchants, bodies pq.StringArray
	topicsOf := make(pq.StringArray, n)
	for i := range rows {
		r := testRow(prefix, i)
		if i == huge {
			r.Body = []byte(strings.Repeat("x", 1_100_000))
		}
		ids, keys, merchants, bodies = append(ids, r.EventID), append(keys, r.Key), append(merchants, r.Merchant), append(bodies, string(r.Body))
		topicsOf[i] = eventTopic
		rows[i] = r
	}
	var id int64
	if err := db.QueryRowx(`INSERT INTO outbox (event_ids, topics, record_keys, merchant_ids, bodies)
		VALUES ($1, $2, $3, $4, $5) RETURNING outbox_id`, ids, topicsOf, keys, merchants, bodies).Scan(&id); err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		rows[i].OutboxID = id
	}
	return rows
}

// consumer reads the event topic (of the test's namespace) from the start in the
// background.
type consumer struct {
	mu   sync.Mutex
	recs []*kgo.Record
}

func startConsumer(t *testing.T, k *kafka) *consumer {
	t.Helper()
	return startConsumerOf(t, k, k.eventTopic())
}

// startConsumerOf reads the topics (their names on the cluster) from the start.
func startConsumerOf(t *testing.T, k *kafka, topicNames ...string) *consumer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.brokers...), kgo.ConsumeTopics(topicNames...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	co := &consumer{}
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			co.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) { co.recs = append(co.recs, r) })
			co.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		cl.Close()
	})
	return co
}

func (co *consumer) snapshot() []*kgo.Record {
	co.mu.Lock()
	defer co.mu.Unlock()
	return append([]*kgo.Record(nil), co.recs...)
}

// waitAll waits until every row's event id has arrived and returns what arrived.
func (co *consumer) waitAll(t *testing.T, rows []outboxRow, timeout time.Duration) []*kgo.Record {
	t.Helper()
	var recs []*kgo.Record
	waittest.Eventually(t, timeout, func() (bool, string) {
		recs = co.snapshot()
		seen := make(map[string]bool, len(recs))
		for _, r := range recs {
			seen[header(r, "event_id")] = true
		}
		missing := 0
		for _, row := range rows {
			if !seen[row.EventID] {
				missing++
			}
		}
		return missing == 0, fmt.Sprintf("%d of %d events never arrived (%d records consumed)", missing, len(rows), len(recs))
	})
	return recs
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// checkRecords verifies that recs carry exactly rows: every event arrives with its
// stored bytes, key and headers; nothing foreign arrives; per record key, the first
// arrival of each event follows outbox_id order (with ordered false, a violation is
// only logged). It returns the duplicate count.
func checkRecords(t *testing.T, k *kafka, recs []*kgo.Record, rows []outboxRow, ordered bool) (duplicates int) {
	t.Helper()
	byID := make(map[string]outboxRow, len(rows))
	seq := make(map[string]int, len(rows)) // rows are in publishing order
	for i, r := range rows {
		byID[r.EventID], seq[r.EventID] = r, i
	}
	seen := make(map[string]bool, len(rows))
	lastByKey := map[string]int{}
	for _, rec := range recs {
		id := header(rec, "event_id")
		row, ok := byID[id]
		if !ok {
			t.Errorf("record at %d/%d has unknown event_id %q", rec.Partition, rec.Offset, id)
			continue
		}
		if rec.Topic != k.eventTopic() {
			t.Errorf("event %s on topic %q, want %q", id, rec.Topic, k.eventTopic())
		}
		if string(rec.Key) != row.Key {
			t.Errorf("event %s has record key %q, want %q", id, rec.Key, row.Key)
		}
		if got := header(rec, "merchant_id"); got != row.Merchant {
			t.Errorf("event %s has merchant_id header %q, want %q", id, got, row.Merchant)
		}
		if string(rec.Value) != string(row.Body) {
			t.Errorf("event %s body differs from the stored bytes:\n got %q\nwant %q", id, rec.Value, row.Body)
		}
		if seen[id] {
			duplicates++
			continue
		}
		seen[id] = true
		if last, ok := lastByKey[row.Key]; ok && seq[id] < last {
			report := t.Errorf
			if !ordered {
				report = t.Logf
			}
			report("key %s: event %s (outbox_id %d, #%d) first arrived after #%d", row.Key, id, row.OutboxID, seq[id], last)
		}
		lastByKey[row.Key] = seq[id]
	}
	for _, r := range rows {
		if !seen[r.EventID] {
			t.Errorf("event %s (outbox_id %d) never arrived", r.EventID, r.OutboxID)
		}
	}
	if len(recs) < len(rows) {
		t.Errorf("%d records arrived, want at least %d", len(recs), len(rows))
	}
	return duplicates
}

func outboxCount(t *testing.T, db *sqlx.DB) int64 {
	t.Helper()
	n, err := storage.OutboxBacklog(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func waitOutboxEmpty(t *testing.T, db *sqlx.DB, timeout time.Duration) {
	t.Helper()
	waittest.Eventually(t, timeout, func() (bool, string) {
		n := outboxCount(t, db)
		return n == 0, fmt.Sprintf("outbox still holds %d rows", n)
	})
}

// publishedPast proves the relay has gone on past everything it did before the
// call: it commits two events one after the other without waking the relay, and
// waits for each to reach Kafka, so the relay has read the outbox and published
// twice more since (on its idle ticks, or after the pause that follows a failed
// cycle). A relay publishes one fetch at a time and waits for it, so whatever it
// sent before those two is in the log by then. It returns their rows.
func publishedPast(t *testing.T, db *sqlx.DB, co *consumer, prefix string) []outboxRow {
	t.Helper()
	var rows []outboxRow
	for i := range 2 {
		rows = append(rows, insertRows(t, db, fmt.Sprintf("%s-past%d", prefix, i), 1)...)
		co.waitAll(t, rows, 10*time.Second)
	}
	return rows
}

// inKafka is how many records the event topic holds: the sum of its partitions'
// end offsets, asked of the broker, so none still on its way to the consumer is
// missed.
func inKafka(t *testing.T, k *kafka) int64 {
	t.Helper()
	cl := k.client(t)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, k.eventTopic())
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of %s/%d: %v", o.Topic, o.Partition, o.Err)
		}
		n += o.Offset
	})
	return n
}

// waitStandbyRetry waits until a backend of the schema other than the lock holder
// has asked for the relay's lock since the call: the standby's retry (every
// second: Relay.Run), seen as the last statement of its connection.
func waitStandbyRetry(t *testing.T, db *sqlx.DB, schema string, holder int) {
	t.Helper()
	var since time.Time
	if err := db.Get(&since, `SELECT clock_timestamp()`); err != nil {
		t.Fatal(err)
	}
	waittest.Eventually(t, 5*time.Second, func() (bool, string) {
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND pid <> $2
			AND query LIKE 'SELECT pg_try_advisory_lock(%' AND state_change > $3`, schema, holder, since); err != nil {
			t.Fatal(err)
		}
		return n > 0, "the standby relay did not ask for the lock again"
	})
}

// leaderPIDs returns the backends holding the relay's advisory lock for schema.
func leaderPIDs(ctx context.Context, db *sqlx.DB, schema string) ([]int, error) {
	var pids []int
	err := db.SelectContext(ctx, &pids, `SELECT pid FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND classid = $1 AND objid = hashtext($2)::oid AND objsubid = 2
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY pid`, relayLockClass, schema)
	return pids, err
}

// waitLeader waits until exactly one backend holds the relay lock and returns it.
func waitLeader(t *testing.T, db *sqlx.DB, schema string, timeout time.Duration) int {
	t.Helper()
	var leader int
	waittest.Eventually(t, timeout, func() (bool, string) {
		pids, err := leaderPIDs(context.Background(), db, schema)
		if err != nil {
			t.Fatal(err)
		}
		if len(pids) > 1 {
			t.Fatalf("%d backends hold the relay lock: %v", len(pids), pids)
		}
		if len(pids) == 1 {
			leader = pids[0]
		}
		return len(pids) == 1, "no relay took the leader lock"
	})
	return leader
}

func producerID(t *testing.T, cl *kgo.Client) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	id, _, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// failProduce makes the produce requests that broker node (-1: any broker) gets
// fail, from request number from through to (counting from 1): a
// NOT_LEADER_FOR_PARTITION answer for every partition, or, if closeConns, every
// second one a closed connection. It returns the count of those requests so far.
func failProduce(c *kfake.Cluster, node int32, from, to int64, closeConns bool) *atomic.Int64 {
	var seen atomic.Int64
	c.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if node >= 0 && c.CurrentNode() != node {
			return nil, nil, false
		}
		n := seen.Add(1)
		if n < from || n > to {
			return nil, nil, false
		}
		if closeConns && n%2 == 0 {
			return nil, errors.New("test: drop the connection"), true
		}
		return kafkatest.ProduceRefused(kreq.(*kmsg.ProduceRequest), kerr.NotLeaderForPartition.Code), nil, true
	})
	return &seen
}

// unknownTopicFailures counts the records a client failed with
// UNKNOWN_TOPIC_OR_PARTITION (a kgo hook): each one an error that reached the
// relay in ProduceSync's results.
type unknownTopicFailures struct{ n atomic.Int64 }

func (u *unknownTopicFailures) OnProduceRecordUnbuffered(_ *kgo.Record, err error) {
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		u.n.Add(1)
	}
}

// publishThroughFaults publishes 300 rows through a relay (a client with opts) on
// a broker that fails produce requests 1 to failed, dropping connections too when
// drop, and checks that every event arrives, in order when ordered, and that the
// outbox empties; the caller goes on with what it returns.
func publishThroughFaults(t *testing.T, prefix string, failed int64, drop, ordered bool, opts ...kgo.Opt) (*kafka, storagetest.Schema, *consumer, *relay.Relay, []outboxRow) {
	t.Helper()
	k := newFakeKafka(t)
	k.ensureTopics(t)
	schema := storagetest.New(t)
	co := startConsumer(t, k)
	seen := failProduce(k.fake, -1, 1, failed, drop)
	rows := insertRows(t, schema.DB, prefix, 300)
	r, _ := startRelay(t, k, schema.DB, newProducer(t, k, opts...))
	r.Wake()

	recs := co.waitAll(t, rows, 20*time.Second)
	if got := seen.Load(); got <= failed {
		t.Errorf("%d produce requests seen, want more than the %d failed ones", got, failed)
	}
	dups := checkRecords(t, k, recs, rows, ordered)
	t.Logf("%d produce requests, %d records for %d events (%d duplicates)", seen.Load(), len(recs), len(rows), dups)
	waitOutboxEmpty(t, schema.DB, 5*time.Second)
	return k, schema, co, r, rows
}

func TestRelay(t *testing.T) {
	t.Parallel()

	t.Run("publishes every event with its stored bytes in outbox order and empties the outbox", func(t *testing.T) {
		t.Parallel()
		k := newKafka(t)
		schema := storagetest.New(t)
		co := startConsumer(t, k)
		const n = 300
		rows := insertRows(t, schema.DB, "inorder", n)
		r, _ := startRelay(t, k, schema.DB, newProducer(t, k))
		r.Wake()

		recs := co.waitAll(t, rows, 20*time.Second)
		if dups := checkRecords(t, k, recs, rows, true); dups != 0 {
			t.Errorf("%d duplicates without any fault, want 0", dups)
		}
		waitOutboxEmpty(t, schema.DB, 5*time.Second)
		// Two more idle looks at the outbox: nothing of the first n is sent again.
		publishedPast(t, schema.DB, co, "inorder")
		if got := inKafka(t, k); got != n+2 {
			t.Errorf("Kafka holds %d records after the outbox emptied and two more events, want %d", got, n+2)
		}
	})

	t.Run("publishes the events of commit rows and single rows in one order and deletes both", func(t *testing.T) {
		t.Parallel()
		k := newKafka(t)
		schema := storagetest.New(t)
		co := startConsumer(t, k)
		var rows []outboxRow
		rows = append(rows, insertRows(t, schema.DB, "s1", 10)...)
		rows = append(rows, insertCommitRow(t, schema.DB, "c1", 50, -1)...)
		rows = append(rows, insertRows(t, schema.DB, "s2", 10)...)
		rows = append(rows, insertCommitRow(t, schema.DB, "c2", 30, -1)...)
		if got := outboxCount(t, schema.DB); got != 100 {
			t.Fatalf("backlog %d before the relay runs, want 100 events (in 22 rows)", got)
		}
		r, _ := startRelay(t, k, schema.DB, newProducer(t, k))
		r.Wake()
		recs := co.waitAll(t, rows, 20*time.Second)
		if dups := checkRecords(t, k, recs, rows, true); dups != 0 {
			t.Errorf("%d duplicates without any fault, want 0", dups)
		}
		waitOutboxEmpty(t, schema.DB, 5*time.Second)
		// checkRecords checked the order key by key: within a commit row it is
		// the arrays' order, across rows outbox_id's.
	})

	t.Run("drains a backlog larger than one fetch batch in order", func(t *testing.T) {
		t.Parallel()
		k := newKafka(t)
		schema := storagetest.New(t)
		co := startConsumer(t, k)
		rows := insertRows(t, schema.DB, "backlog", 1234) // relay fetches 500 at a time
		startRelay(t, k, schema.DB, newProducer(t, k))

		recs := co.waitAll(t, rows, 20*time.Second)
		if dups := checkRecords(t, k, recs, rows, true); dups != 0 {
			t.Errorf("%d duplicates without any fault, want 0", dups)
		}
		waitOutboxEmpty(t, schema.DB, 5*time.Second)
	})

	// fastRetry keeps the client's retries of a failed produce short: the default
	// backoff and metadata age would make each fault cost seconds.
	fastRetry := func(more ...kgo.Opt) []kgo.Opt {
		return append([]kgo.Opt{kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
			kgo.MetadataMinAge(20 * time.Millisecond)}, more...)
	}

	t.Run("broker faults retried by the client lose no event", func(t *testing.T) {
		t.Parallel()
		// kfake: fails produce requests and drops connections (ControlKey).
		k, schema, co, r, rows := publishThroughFaults(t, "faults", 6, true, true, fastRetry()...)
		more := append(rows, insertRows(t, schema.DB, "faults-after", 30)...)
		r.Wake()
		checkRecords(t, k, co.waitAll(t, more, 5*time.Second), more, true)
		waitOutboxEmpty(t, schema.DB, 5*time.Second)
	})

	t.Run("produce errors that reach the relay are retried from the outbox", func(t *testing.T) {
		t.Parallel()
		// kfake: fails produce requests until the client gives up (ControlKey).
		// One retry only: the failures outlast the client and ProduceSync fails, so
		// the relay itself must publish the rows again. Order is not asserted: a
		// client that gives up on records can fail a partition's first batch and
		// deliver its next one, and the relay's republish then puts the first after
		// it (the service's client retries without limit, where order holds).
		publishThroughFaults(t, "relayretry", 4, false, false, fastRetry(kgo.RecordRetries(1))...)
	})

	// The property of the test above without fault injection, so on the real
	// cluster too: a relay started before its topics exist (auto-creation off, as
	// in production) has its produces fail with UNKNOWN_TOPIC_OR_PARTITION once
	// the client gives up on the topic (kgo's UnknownTopicRetries), and publishes
	// every event from the outbox, once and in order, when the topics are created.
	t.Run("a relay started before its topics exist publishes every event once they do", func(t *testing.T) {
		t.Parallel()
		brokers, ns := kafkatest.Cluster(t, kfake.NumBrokers(1))
		k := &kafka{brokers: brokers, ns: ns} // no topics yet
		schema := storagetest.New(t)
		rows := insertRows(t, schema.DB, "notopic", 50) // one fetch: a failed cycle fails them all
		unknown := &unknownTopicFailures{}
		r, _ := startRelay(t, k, schema.DB, newProducer(t, k, kgo.WithHooks(unknown)))
		r.Wake()
		waittest.Eventually(t, 30*time.Second, func() (bool, string) {
			n := unknown.n.Load()
			return n >= int64(len(rows)), fmt.Sprintf("%d records failed with UNKNOWN_TOPIC_OR_PARTITION, want every one of the %d of a cycle", n, len(rows))
		})
		if got := outboxCount(t, schema.DB); got != int64(len(rows)) {
			t.Fatalf("backlog %d after a failed cycle, want all %d events still in the outbox", got, len(rows))
		}
		k.ensureTopics(t)
		co := startConsumer(t, k)
		recs := co.waitAll(t, rows, 30*time.Second)
		if dups := checkRecords(t, k, recs, rows, true); dups != 0 {
			t.Errorf("%d duplicates: a produce that failed for an unknown topic stored nothing", dups)
		}
		t.Logf("%d records failed as of an unknown topic before the topics were created", unknown.n.Load())
		waitOutboxEmpty(t, schema.DB, 5*time.Second)
	})

	t.Run("a produce that fails on one broker after the others took their part publishes it all again", func(t *testing.T) {
		t.Parallel()
		// kfake: places partition leaders on two brokers (MoveTopicPartition) and
		// fails one broker's produce requests (ControlKey).
		k := newFakeKafka(t, kfake.NumBrokers(2), kfake.SeedTopics(4, eventTopic))
		c := k.fake
		schema := storagetest.New(t)
		co := startConsumer(t, k)
		rows := insertRows(t, schema.DB, "partial", 300)
		// Put the partition of the first aggregate on broker 0 and every other one
		// on broker 1, then fail broker 0's first produce requests: with one retry,
		// ProduceSync fails although broker 1 stored its records.
		part := func(key string) int32 {
			return int32(kgo.StickyKeyPartitioner(nil).ForTopic(eventTopic).Partition(&kgo.Record{Key: []byte(key)}, 4))
		}
		failing := part(rows[0].Key)
		others := 0
		for p := range int32(4) {
			node := int32(1)
			if p == failing {
				node = 0
			}
			if err := c.MoveTopicPartition(eventTopic, p, node); err != nil {
				t.Fatal(err)
			}
		}
		for _, row := range rows[:3] {
			if part(row.Key) != failing {
				others++
			}
		}
		if others == 0 {
			t.Fatal("every test aggregate hashes to one partition: change the record keys")
		}
		// Six failures, not two: the client may split broker 0's records over
		// several requests, and two failures spread over two of them leave each
		// record one retry, so ProduceSync would succeed and the test prove nothing.
		seen := failProduce(c, 0, 1, 6, false)
		// Order is not asserted, as in the test above.
		r, _ := startRelay(t, k, schema.DB, newProducer(t, k, fastRetry(kgo.RecordRetries(1))...))
		r.Wake()

		recs := co.waitAll(t, rows, 20*time.Second)
		dups := checkRecords(t, k, recs, rows, false)
		t.Logf("%d produce requests to broker 0, %d records for %d events (%d duplicates)", seen.Load(), len(recs), len(rows), dups)
		if dups == 0 {
			t.Errorf("no duplicates: the failed ProduceSync was not published again, or the fault did not split the batch")
		}
		waitOutboxEmpty(t, schema.DB, 5*time.Second)
	})

	t.Run("one of two relays leads and publishes each event once", func(t *testing.T) {
		t.Parallel()
		k := newKafka(t)
		schema := storagetest.New(t)
		dbB := ownPool(t, schema.URL)
		// Each relay has a pool of its own, and the test's queries a third: a
		// standby's connection then shows its last lock request (waitStandbyRetry).
		dbA := ownPool(t, schema.URL)
		co := startConsumer(t, k)
		const n = 300
		rows := insertRows(t, schema.DB, "oneleader", n)

		// Sample the lock table for as long as the relays run.
		var maxHolders atomic.Int64
		var sampleErr atomic.Value
		sctx, stopSampling := context.WithCancel(context.Background())
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			for sctx.Err() == nil {
				pids, err := leaderPIDs(sctx, schema.DB, schema.Name)
				if err != nil {
					if sctx.Err() == nil {
						sampleErr.Store(err)
					}
					return
				}
				if h := int64(len(pids)); h > maxHolders.Load() {
					maxHolders.Store(h)
				}
				time.Sleep(5 * time.Millisecond) // the sampling pace: a sampler, not a wait
			}
		}()
		t.Cleanup(func() { stopSampling(); <-sampled })

		prodA, prodB := newProducer(t, k), newProducer(t, k)
		ra, _ := startRelay(t, k, dbA, prodA)
		rb, _ := startRelay(t, k, dbB, prodB)
		ra.Wake()
		rb.Wake()

		recs := co.waitAll(t, rows, 20*time.Second)
		if dups := checkRecords(t, k, recs, rows, true); dups != 0 {
			t.Errorf("%d duplicates with two relays, want 0: only the leader may publish", dups)
		}
		waitOutboxEmpty(t, schema.DB, 5*time.Second)
		producers := map[int64]int{}
		for _, rec := range recs {
			producers[rec.ProducerID]++
		}
		if len(producers) != 1 {
			t.Errorf("records came from %d producers %v, want 1 (the leader)", len(producers), producers)
		}
		// Both relays are still running: exactly one holds the lock.
		holder := waitLeader(t, schema.DB, schema.Name, 2*time.Second)
		waitStandbyRetry(t, schema.DB, schema.Name, holder)
		if pids, err := leaderPIDs(context.Background(), schema.DB, schema.Name); err != nil {
			t.Fatal(err)
		} else if len(pids) != 1 {
			t.Errorf("%d backends hold the relay lock while both relays run, want 1: %v", len(pids), pids)
		}
		stopSampling()
		<-sampled
		if err, _ := sampleErr.Load().(error); err != nil {
			t.Fatal(err)
		}
		if m := maxHolders.Load(); m != 1 {
			t.Errorf("at most %d backends held the relay lock at once, want exactly 1", m)
		}
	})

	t.Run("a standby relay takes over when the leader stops", func(t *testing.T) {
		t.Parallel()
		k := newKafka(t)
		schema := storagetest.New(t)
		dbB := ownPool(t, schema.URL)
		co := startConsumer(t, k)
		prodA, prodB := newProducer(t, k), newProducer(t, k)
		idA, idB := producerID(t, prodA), producerID(t, prodB)

		ra, stopA := startRelay(t, k, schema.DB, prodA)
		pidA := waitLeader(t, schema.DB, schema.Name, 2*time.Second)
		rb, _ := startRelay(t, k, dbB, prodB)

		first := insertRows(t, schema.DB, "before", 60)
		ra.Wake()
		rb.Wake()
		recs := co.waitAll(t, first, 5*time.Second)
		for _, rec := range recs {
			if rec.ProducerID != idA {
				t.Errorf("event %s came from producer %d, want the leader's %d", header(rec, "event_id"), rec.ProducerID, idA)
			}
		}
		waitOutboxEmpty(t, schema.DB, 5*time.Second)

		stopA()
		second := insertRows(t, schema.DB, "after", 60)
		start := time.Now()
		rb.Wake()
		recs = co.waitAll(t, append(first, second...), 5*time.Second)
		t.Logf("standby published %d new events %v after the leader stopped", len(second), time.Since(start))
		if dups := checkRecords(t, k, recs, append(first, second...), true); dups != 0 {
			t.Errorf("%d duplicates across the handover, want 0", dups)
		}
		for _, rec := range recs[len(first):] {
			if rec.ProducerID != idB {
				t.Errorf("event %s came from producer %d after the handover, want the standby's %d", header(rec, "event_id"), rec.ProducerID, idB)
			}
		}
		waitOutboxEmpty(t, schema.DB, 5*time.Second)
		if pidB := waitLeader(t, schema.DB, schema.Name, 2*time.Second); pidB == pidA {
			t.Errorf("the lock is still held by the stopped leader's backend %d", pidA)
		}
	})

	t.Run("rows committed after start are published quickly on Wake", func(t *testing.T) {
		t.Parallel()
		k := newKafka(t)
		schema := storagetest.New(t)
		co := startConsumer(t, k)
		r, _ := startRelay(t, k, schema.DB, newProducer(t, k))
		waitLeader(t, schema.DB, schema.Name, 2*time.Second)
		// The leader is in its loop and idle on an empty outbox: it has published
		// events nothing woke it for, and nothing is left.
		all := publishedPast(t, schema.DB, co, "idle")
		waitOutboxEmpty(t, schema.DB, 5*time.Second)

		for round := range 5 {
			rows := insertRows(t, schema.DB, fmt.Sprintf("late%d", round), 20)
			all = append(all, rows...)
			start := time.Now()
			r.Wake()
			co.waitAll(t, all, 2*time.Second)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("round %d: events took %v to arrive after Wake, want < 2s", round, d)
			}
		}
		if dups := checkRecords(t, k, co.snapshot(), all, true); dups != 0 {
			t.Errorf("%d duplicates without any fault, want 0", dups)
		}
		waitOutboxEmpty(t, schema.DB, 5*time.Second)
	})
}

// An event Kafka refuses for good (too large for the broker) must not block the
// outbox behind it, nor make the relay republish its neighbours forever: it moves to
// outbox_dead and the rest flow.
func TestRelay_DeadLetter(t *testing.T) {
	t.Parallel()
	k := newKafka(t)
	schema := storagetest.New(t)
	co := startConsumer(t, k)
	before := insertRows(t, schema.DB, "dl-before", 10)
	if _, err := schema.DB.Exec(`INSERT INTO outbox (event_id, topic, record_key, merchant_id, body) VALUES ('huge', $1, 'k', 'm', $2)`,
		eventTopic, make([]byte, 1_100_000)); err != nil {
		t.Fatal(err)
	}
	after := insertRows(t, schema.DB, "dl-after", 10)
	r, _ := startRelay(t, k, schema.DB, newProducer(t, k))
	r.Wake()
	recs := co.waitAll(t, append(before, after...), 20*time.Second)
	waitOutboxEmpty(t, schema.DB, 5*time.Second)
	publishedPast(t, schema.DB, co, "dl") // past any retry: nothing is republished
	if got := inKafka(t, k); got != 20+2 {
		t.Fatalf("Kafka holds %d records for 20 normal events and 2 more, want 22 (republished, or the huge one got through)", got)
	}
	checkRecords(t, k, recs, append(before, after...), true)
	var dead struct {
		EventID string `db:"event_id"`
		Error   string `db:"error"`
		Size    int    `db:"size"`
	}
	if err := schema.DB.Get(&dead, `SELECT event_id, error, length(body) AS size FROM outbox_dead`); err != nil {
		t.Fatalf("dead letter: %v", err)
	}
	if dead.EventID != "huge" || dead.Size != 1_100_000 || dead.Error == "" {
		t.Fatalf("dead letter %+v", dead)
	}
}

// An event Kafka refuses for good inside a commit's row is set aside alone: the
// row's other events and the rows after it are published once, and the row goes.
func TestRelay_DeadLetterInACommitRow(t *testing.T) {
	t.Parallel()
	k := newKafka(t)
	schema := storagetest.New(t)
	co := startConsumer(t, k)
	row := insertCommitRow(t, schema.DB, "dlc", 11, 5)
	after := insertRows(t, schema.DB, "dlc-after", 5)
	good := append(append(append([]outboxRow(nil), row[:5]...), row[6:]...), after...)
	r, _ := startRelay(t, k, schema.DB, newProducer(t, k))
	r.Wake()
	recs := co.waitAll(t, good, 20*time.Second)
	waitOutboxEmpty(t, schema.DB, 5*time.Second)
	publishedPast(t, schema.DB, co, "dlc") // past any retry: nothing is republished
	if got := inKafka(t, k); got != int64(len(good))+2 {
		t.Fatalf("Kafka holds %d records for %d normal events and 2 more, want %d (republished, or the huge one got through)", got, len(good), len(good)+2)
	}
	checkRecords(t, k, recs, good, true)
	var dead []struct {
		OutboxID int64  `db:"outbox_id"`
		EventID  string `db:"event_id"`
		Size     int    `db:"size"`
	}
	if err := schema.DB.Select(&dead, `SELECT outbox_id, event_id, length(body) AS size FROM outbox_dead`); err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0].EventID != row[5].EventID || dead[0].OutboxID != row[5].OutboxID || dead[0].Size != 1_100_000 {
		t.Fatalf("outbox_dead holds %+v, want only %s of row %d", dead, row[5].EventID, row[5].OutboxID)
	}
}

// Events that are each within the topic's limit but together over it, in one
// partition (a payment file's rail requests are ~60 kB each, all keyed by the file),
// are all published: the relay's batches stay under max.message.bytes. Their bodies
// are random base64, which no codec shrinks, so compression cannot hide a batch over
// the limit. With the command producer's 16 MiB batches the broker refused the
// batch whole and every event in it was dead-lettered.
func TestRelay_EventsOverTheTopicLimitTogether(t *testing.T) {
	t.Parallel()
	k := newKafka(t)
	schema := storagetest.New(t)
	co := startConsumer(t, k)
	const n, size = 24, 60_000 // 1.44 MB in all
	rows := make([]outboxRow, n)
	var ids, keys, merchants, bodies, topicsOf pq.StringArray
	for i := range rows {
		raw := make([]byte, size*3/4)
		if _, err := rand.Read(raw); err != nil {
			t.Fatal(err)
		}
		rows[i] = outboxRow{EventID: fmt.Sprintf("big-%02d", i), Key: "file-1", Merchant: "mer_big",
			Body: []byte(`{"chunk":"` + base64.StdEncoding.EncodeToString(raw) + `"}`)}
		ids, keys, merchants = append(ids, rows[i].EventID), append(keys, rows[i].Key), append(merchants, rows[i].Merchant)
		bodies, topicsOf = append(bodies, string(rows[i].Body)), append(topicsOf, eventTopic)
	}
	var id int64
	if err := schema.DB.QueryRowx(`INSERT INTO outbox (event_ids, topics, record_keys, merchant_ids, bodies)
		VALUES ($1, $2, $3, $4, $5) RETURNING outbox_id`, ids, topicsOf, keys, merchants, bodies).Scan(&id); err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		rows[i].OutboxID = id
	}
	r, _ := startRelay(t, k, schema.DB, newProducer(t, k))
	r.Wake()
	recs := co.waitAll(t, rows, 20*time.Second)
	waitOutboxEmpty(t, schema.DB, 5*time.Second)
	checkRecords(t, k, recs, rows, true)
	var dead int
	if err := schema.DB.Get(&dead, `SELECT count(*) FROM outbox_dead`); err != nil {
		t.Fatal(err)
	}
	if dead != 0 {
		t.Fatalf("%d events dead-lettered; each is within the topic's limit", dead)
	}
}
