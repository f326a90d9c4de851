package dispatch_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/outbound/webhooks"
	"paysvc/actors/outbound/webhooks/dispatch"
	"paysvc/actors/outbound/webhooks/outbound"
	"paysvc/actors/values/ids"
	"paysvc/actors/values/waittest"
	"paysvc/storage"
	"paysvc/storage/storagetest"
	"paysvc/topics"
	"paysvc/topics/kafkatest"
)

const secret = "hook-secret-1"

// signingKey keys the test webhooks' webhook-signature (whsec_ bytes).
var signingKey = []byte("0123456789abcdef0123456789abcdef")

// arrival is one request the receiver got: the event, what it answered, and whether
// both signatures verified.
type arrival struct {
	EventID  string
	Status   int
	Verified bool
	Headers  map[string]string // the signature headers as received
}

// receiver answers each event from a script (then 200) and keeps every arrival in order.
type receiver struct {
	mu     sync.Mutex
	script map[string][]int
	got    []arrival
	srv    *httptest.Server
	delay  time.Duration // a slow receiver: each answer after this
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{script: map[string][]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		h := map[string]string{}
		for _, k := range []string{"X-SERVICE-Signature", "webhook-id", "webhook-timestamp", "webhook-signature"} {
			h[k] = req.Header.Get(k)
		}
		id := h["webhook-id"]
		r.mu.Lock()
		status := 200
		if s := r.script[id]; len(s) > 0 {
			status, r.script[id] = s[0], s[1:]
		}
		r.got = append(r.got, arrival{id, status, webhooks.VerifyDelivery(secret, signingKey, h, b, time.Now(), time.Minute), h})
		delay := r.delay
		r.mu.Unlock()
		time.Sleep(delay) // a slow receiver: the delay is what the test is about
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) answer(eventID string, statuses ...int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.script[eventID] = statuses
}

func (r *receiver) arrivals() []arrival {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// delivered is the events answered 200, in arrival order.
func (r *receiver) delivered() []string {
	var out []string
	for _, a := range r.arrivals() {
		if a.Status == 200 {
			out = append(out, a.EventID)
		}
	}
	return out
}

type bundle struct {
	t        *testing.T
	db       storagetest.Schema
	brokers  []string
	producer *kgo.Client
	merchant string
	webhook  string
	recv     *receiver
	cfg      dispatch.Config
	stop     func() // stops setup's dispatcher
}

// setup starts Postgres (a schema), the test's Kafka (kafkatest.Cluster: the
// shared real cluster in a fresh namespace, which becomes cfg.Namespace, or a
// kfake of its own) with paysvc's topics, one merchant with a webhook on
// wallet_transfer_event pointing at a receiver, and a dispatcher.
func setup(t *testing.T, cfg dispatch.Config) *bundle {
	t.Helper()
	b := setupIdle(t, cfg)
	b.start()
	return b
}

// newFakeKafka is a kfake cluster of the test's own whatever kafkatest.Real
// says, for a test that needs a cluster to itself (each caller says why).
func newFakeKafka(t *testing.T) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.GroupMinSessionTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// setupOn is setup on these brokers, with the topics in cfg.Namespace.
func setupOn(t *testing.T, brokers []string, cfg dispatch.Config) *bundle {
	t.Helper()
	b := newBundle(t, brokers, cfg)
	b.start()
	return b
}

// newBundle is setupOn but for the dispatcher, which start starts.
func newBundle(t *testing.T, brokers []string, cfg dispatch.Config) *bundle {
	t.Helper()
	schema := storagetest.New(t)
	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)
	ensureTopics(t, producer, cfg.Namespace)
	ctx := context.Background()
	b := &bundle{t: t, db: schema, brokers: brokers, producer: producer, recv: newReceiver(t),
		merchant: "MER" + ids.Alias(9), webhook: "WH" + ids.Alias(9)}
	if err := storage.InsertMerchant(ctx, schema.DB, storage.Merchant{MerchantID: b.merchant, Name: "Hooks", Environment: "sandbox", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := storage.InsertWebhook(ctx, schema.DB, storage.Webhook{WebhookID: b.webhook, MerchantID: b.merchant,
		Endpoint: b.recv.srv.URL + "/hook", Challenge: secret, SigningSecret: signingKey, IsActive: true, WalletTransferEvent: true,
		CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = time.Second
	}
	if cfg.Poll == 0 {
		cfg.Poll = 20 * time.Millisecond
	}
	b.cfg = cfg
	return b
}

// setupIdle is setup without starting the dispatcher: the test publishes first,
// then calls start, so the dispatcher finds every event in Kafka at its first
// fetch. A test whose assertion compares deliveries with a timer (a retry's
// backoff, a slow receiver's answers) publishes this way: on the real cluster
// each ProduceSync (acks=all, three replicas) takes from tens of milliseconds to
// more than a second on a busy machine, so events published one by one while the
// dispatcher runs arrive spread over more time than those timers allow.
func setupIdle(t *testing.T, cfg dispatch.Config) *bundle {
	t.Helper()
	brokers, ns := kafkatest.Cluster(t, kfake.GroupMinSessionTimeout(time.Second))
	cfg.Namespace = ns
	b := newBundle(t, brokers, cfg)
	b.stop = func() {}
	return b
}

// start starts the bundle's dispatcher (setup's, stopped by stop and at cleanup).
func (b *bundle) start() {
	b.stop = b.run()
	b.t.Cleanup(b.stop)
}

// ensureTopics creates paysvc's topics in namespace ns (the event topics have 4
// partitions each) and waits until every broker knows them
// (kafkatest.KnownToEveryBroker). The bound is generous: a busy machine's KRaft
// controller can take tens of seconds to create a dozen topics.
func ensureTopics(t *testing.T, cl *kgo.Client, ns topics.Namespace) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := topics.EnsureTopics(ctx, cl, ns, 1); err != nil {
		t.Fatal(err)
	}
	if err := kafkatest.KnownToEveryBroker(ctx, cl, ns.Topics(topics.AllTopics()...)); err != nil {
		t.Fatal(err)
	}
}

// run starts a dispatcher of the bundle; the function returned stops it (shutdown,
// as on SIGTERM) and waits until it has.
func (b *bundle) run() func() {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("PAYSVC_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	d := dispatch.New(b.cfg, b.db.DB, outbound.New(outbound.Options{AllowPrivate: true}), nil, log)
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx, b.brokers) }()
	var once sync.Once
	return func() {
		once.Do(func() {
			stop()
			if err := <-done; err != nil {
				b.t.Errorf("dispatcher: %v", err)
			}
		})
	}
}

// newIDs makes n event ids.
func newIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "evt_" + ids.Alias(12)
	}
	return out
}

// send publishes wallet_transfer_events of the merchant with these ids, keyed by
// aggregate, as the relay does.
func (b *bundle) send(aggregate string, evIDs ...string) {
	b.t.Helper()
	b.sendAs(b.merchant, aggregate, evIDs...)
}

// sendAs is send for another merchant of the bundle's database, with the
// relay's merchant_id header.
func (b *bundle) sendAs(merchant, aggregate string, evIDs ...string) {
	b.t.Helper()
	b.sendRecords(merchant, aggregate, true, evIDs...)
}

// sendRecords publishes the events, with the merchant_id header or without it
// (a producer other than the relay).
func (b *bundle) sendRecords(merchant, aggregate string, withHeader bool, evIDs ...string) {
	b.t.Helper()
	b.sendOn(b.cfg.Namespace.Topic(topics.EventTopics[topics.WalletTransferEvent]), merchant, aggregate, withHeader, evIDs...)
}

// sendOn is sendRecords to the topic of that name on the cluster. The events go
// in one ProduceSync, in order: they share a key, so a partition, where one
// producer's records keep their order. (One ProduceSync per event is one acks=all
// round trip each on the real cluster: ManyEventsInOrder's 180 took most of a
// minute on a busy machine.)
func (b *bundle) sendOn(topic, merchant, aggregate string, withHeader bool, evIDs ...string) {
	b.t.Helper()
	recs := make([]*kgo.Record, 0, len(evIDs))
	for _, id := range evIDs {
		ev := topics.Event{ID: id, Type: topics.WalletTransferEvent, Version: 1, OccurredAt: time.Now(), MerchantID: merchant,
			Key: aggregate, Payload: json.RawMessage(fmt.Sprintf(`{"id":%q,"origin_wallet_id":%q}`, id, aggregate))}
		v, _ := json.Marshal(ev)
		rec := &kgo.Record{Topic: topic, Key: []byte(aggregate), Value: v}
		if withHeader {
			rec.Headers = []kgo.RecordHeader{{Key: "event_id", Value: []byte(id)}, {Key: "merchant_id", Value: []byte(merchant)}}
		}
		recs = append(recs, rec)
	}
	if err := b.producer.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		b.t.Fatal(err)
	}
}

// Events are matched to webhooks by merchant whether the merchant comes from the
// relay's header (the event is then decoded only if the merchant has webhooks) or,
// without the header, from the decoded event; a merchant without webhooks gets no
// deliveries either way, and an undecodable record is skipped without stopping
// the others.
func TestEventsWithAndWithoutMerchantHeader(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatch.Config{})
	hookless := "MER" + ids.Alias(9)
	if err := storage.InsertMerchant(context.Background(), b.db.DB, storage.Merchant{MerchantID: hookless, Name: "No hooks",
		Environment: "sandbox", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	withHeader, without, skipped := newIDs(3), newIDs(3), newIDs(4)
	b.sendRecords(hookless, "W-NONE", true, skipped[:2]...)
	b.sendRecords(b.merchant, "W-H", true, withHeader...)
	if err := b.producer.ProduceSync(context.Background(), &kgo.Record{Topic: b.cfg.Namespace.Topic(topics.EventTopics[topics.WalletTransferEvent]),
		Key: []byte("W-BAD"), Value: []byte(`{not json`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	b.sendRecords(hookless, "W-NONE", false, skipped[2:]...)
	b.sendRecords(b.merchant, "W-N", false, without...)
	// Processed past the skipped records: an event of the merchant with webhooks
	// after them under each of their keys (so in each of their partitions, read in
	// order) is recorded only once every record before it has been.
	past := newIDs(2)
	b.send("W-NONE", past[0])
	b.send("W-BAD", past[1])
	b.waitDelivered(8)
	var got []string
	if err := b.db.DB.Select(&got, `SELECT event_id FROM webhook_deliveries ORDER BY event_id`); err != nil {
		t.Fatal(err)
	}
	want := append(append(append([]string{}, withHeader...), without...), past...)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("deliveries for %v, want exactly %v (none for the merchant without webhooks)", got, want)
	}
}

// publish sends n new events of the aggregate and returns their ids.
func (b *bundle) publish(aggregate string, n int) []string {
	b.t.Helper()
	evIDs := newIDs(n)
	b.send(aggregate, evIDs...)
	return evIDs
}

func (b *bundle) waitDelivered(n int) {
	b.t.Helper()
	// A liveness bound, not a speed target: the fault tests deliver a few hundred
	// events one by one per queue on a PostgreSQL that the whole suite shares,
	// and on a loaded CI machine that once took longer than 30 s.
	err := waittest.Wait(90*time.Second, func() (bool, string) {
		var done int
		// An error is a connection a fault test killed: ask again.
		_ = b.db.DB.Get(&done, `SELECT count(*) FROM webhook_deliveries WHERE status = 'DELIVERED'`)
		return done >= n, fmt.Sprintf("%d of %d deliveries DELIVERED", done, n)
	})
	if err != nil { // the stuck deliveries are described once, not on every look
		b.t.Fatalf("%v; arrivals %+v\n%s", err, b.recv.arrivals(), b.undelivered())
	}
}

// undelivered describes the deliveries not DELIVERED and every queue, for a
// failure message: which one is stuck, and whether a lease holds it.
func (b *bundle) undelivered() string {
	var ds []struct {
		EventID string         `db:"event_id"`
		AggKey  string         `db:"agg_key"`
		Status  string         `db:"status"`
		Tries   int            `db:"attempts"`
		Next    time.Time      `db:"next_attempt_at"`
		Err     sql.NullString `db:"last_error"`
	}
	var qs []struct {
		AggKey string    `db:"agg_key"`
		Next   time.Time `db:"next_attempt_at"`
		Lease  int64     `db:"lease_id"`
	}
	err1 := b.db.DB.Select(&ds, `SELECT event_id, agg_key, status, attempts, next_attempt_at, last_error FROM webhook_deliveries
		WHERE status <> 'DELIVERED' ORDER BY agg_key, src_offset LIMIT 50`)
	err2 := b.db.DB.Select(&qs, `SELECT agg_key, next_attempt_at, lease_id FROM webhook_queues ORDER BY agg_key`)
	var recorded int
	err3 := b.db.DB.Get(&recorded, `SELECT count(*) FROM webhook_deliveries`)
	return fmt.Sprintf("now %s; %d deliveries recorded (%v)\nnot delivered (%v): %+v\nqueues (%v): %+v",
		time.Now().Format(time.RFC3339Nano), recorded, err3, err1, ds, err2, qs)
}

// lastIndex is where id last arrives in arrivals, or -1.
func lastIndex(as []arrival, id string) int {
	for i := len(as) - 1; i >= 0; i-- {
		if as[i].EventID == id {
			return i
		}
	}
	return -1
}

// index is where id first arrives with status (0: any) in arrivals, or -1.
func index(as []arrival, id string, status int) int {
	return slices.IndexFunc(as, func(a arrival) bool { return a.EventID == id && (status == 0 || a.Status == status) })
}

func TestOrderPerAggregate(t *testing.T) {
	t.Parallel()

	// An event whose delivery fails and is retried is not overtaken by the next event
	// of its aggregate to the same webhook; another aggregate's event is not held back.
	t.Run("RetriedDeliveryNotOvertaken", func(t *testing.T) {
		t.Parallel()
		// Every event in Kafka before the dispatcher starts (setupIdle): the other
		// aggregate's must be delivered within the retry's backoff (400-800 ms).
		b := setupIdle(t, dispatch.Config{RetryBase: 400 * time.Millisecond})
		first := newIDs(1)[0]
		b.recv.answer(first, 500) // then 200
		b.send("WALLET-A", first)
		later := b.publish("WALLET-A", 2)
		other := b.publish("WALLET-B", 1)[0]
		b.start()
		b.waitDelivered(4)

		as := b.recv.arrivals()
		failed, retried := index(as, first, 500), index(as, first, 200)
		if failed < 0 || retried < failed || index(as, first, 0) != failed {
			t.Fatalf("the first event should fail first, then succeed: %+v", as)
		}
		for _, id := range later {
			if i := index(as, id, 0); i < retried {
				t.Fatalf("event %s of the same aggregate arrived (at %d) before the retried one succeeded (at %d): %+v", id, i, retried, as)
			}
		}
		if index(as, later[0], 0) > index(as, later[1], 0) {
			t.Fatalf("the later events arrived out of order: %+v", as)
		}
		if i := index(as, other, 200); i > retried {
			t.Fatalf("another aggregate's event waited for the retry (at %d, retry at %d): %+v", i, retried, as)
		}
		for _, a := range as {
			if !a.Verified {
				t.Fatalf("a delivery does not verify: %+v", a)
			}
		}
		var attempts []int
		if err := b.db.DB.Select(&attempts, `SELECT attempts FROM webhook_deliveries ORDER BY src_offset`); err != nil {
			t.Fatal(err)
		}
		if got := slices.Max(attempts); got != 2 {
			t.Fatalf("attempts per delivery %v: the failing one should have 2", attempts)
		}
	})

	// The event record's status: PENDING before the first attempt, PROCESSING from
	// the moment it is attempted and while a failed attempt waits for its retry,
	// DELIVERED after.
	t.Run("RetryingDeliveryIsProcessing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, dispatch.Config{RetryBase: 2 * time.Second})
		ev := newIDs(1)[0]
		b.recv.answer(ev, 500)
		b.send("WALLET-P", ev)
		waittest.Eventually(t, 10*time.Second, func() (bool, string) {
			var st struct {
				Status   string `db:"status"`
				Attempts int    `db:"attempts"`
			}
			err := b.db.DB.Get(&st, `SELECT status, attempts FROM webhook_deliveries WHERE event_id = $1`, ev)
			if err == nil && st.Attempts == 1 {
				if st.Status != "PROCESSING" {
					t.Fatalf("after a failed attempt with a retry due the status is %q, want PROCESSING", st.Status)
				}
				return true, ""
			}
			if err == nil && st.Attempts == 0 && st.Status != "PENDING" && st.Status != "PROCESSING" {
				t.Fatalf("before the first attempt's outcome the status is %q, want PENDING or PROCESSING", st.Status)
			}
			return false, fmt.Sprintf("no failed attempt recorded: %+v %v", st, err)
		})
		b.waitDelivered(1)
	})

	// A delivery that runs out of attempts is FAILED, and the next event of its
	// aggregate goes on.
	t.Run("FailedDeliveryReleasesTheNext", func(t *testing.T) {
		t.Parallel()
		b := setup(t, dispatch.Config{RetryBase: 50 * time.Millisecond, MaxAttempts: 2})
		evs := newIDs(2)
		b.recv.answer(evs[0], 500, 500)
		b.send("WALLET-A", evs...)
		b.waitDelivered(1)
		as := b.recv.arrivals()
		var status string
		if err := b.db.DB.Get(&status, `SELECT status FROM webhook_deliveries WHERE event_id = $1`, evs[0]); err != nil || status != "FAILED" {
			t.Fatalf("first delivery %q (%v), want FAILED", status, err)
		}
		if i, j := lastIndex(as, evs[0]), index(as, evs[1], 200); len(as) != 3 || j < i {
			t.Fatalf("the next event should arrive once, after the last attempt of the failed one: %+v", as)
		}
	})

	// Many events of a few aggregates, all answered 200: each aggregate's events
	// arrive in the order they were published, each once.
	t.Run("ManyEventsInOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t, dispatch.Config{PerQueue: 8, Workers: 4})
		want := map[string][]string{}
		var all []string
		for round := range 5 {
			for _, agg := range []string{"W1", "W2", "W3"} {
				ids := b.publish(agg, 10+round)
				want[agg] = append(want[agg], ids...)
				all = append(all, ids...)
			}
		}
		b.waitDelivered(len(all))
		got := b.recv.delivered()
		if len(got) != len(all) {
			t.Fatalf("%d deliveries for %d events", len(got), len(all))
		}
		for agg, ids := range want {
			var seen []string
			for _, id := range got {
				if slices.Contains(ids, id) {
					seen = append(seen, id)
				}
			}
			if !slices.Equal(seen, ids) {
				t.Fatalf("aggregate %s arrived out of order:\n got %v\nwant %v", agg, seen, ids)
			}
		}
		b.waitNoQueues()
	})
}

// waitNoQueues waits until every queue was found empty and removed.
func (b *bundle) waitNoQueues() {
	b.t.Helper()
	waittest.Eventually(b.t, 10*time.Second, func() (bool, string) {
		n := -1
		_ = b.db.DB.Get(&n, `SELECT count(*) FROM webhook_queues`)
		return n == 0, fmt.Sprintf("%d queues left after every delivery was done", n)
	})
}

// A queue leased by a dispatcher that died (claimed, never finished) is sent by
// another once the lease runs out, from its oldest delivery.
func TestLeaseOfDeadDispatcherRunsOut(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatch.Config{Lease: 800 * time.Millisecond})
	// The dispatcher under test must not take the queue first: record the
	// deliveries and lease their queue as a dispatcher that then dies would.
	evs := newIDs(3)
	ctx := context.Background()
	var rows []storage.NewDelivery
	for i, id := range evs {
		body, _ := webhooks.Body(topics.WalletTransferEvent, json.RawMessage(`{}`), "") // the webhook does not opt in to the echo
		rows = append(rows, storage.NewDelivery{EventID: id, WebhookID: b.webhook, MerchantID: b.merchant,
			Topic: topics.WalletTransferEvent, AggKey: "WALLET-Z", Partition: 0, Offset: int64(100 + i), Body: body})
	}
	leasedAt := time.Now()
	ins, err := storage.InsertDeliveries(ctx, b.db.DB, rows, 1, 800*time.Millisecond)
	if err != nil || len(ins.Leased) != 1 || len(ins.New) != 3 {
		t.Fatalf("insert: %+v %v", ins, err)
	}
	if again, err := storage.InsertDeliveries(ctx, b.db.DB, rows, 1, time.Minute); err != nil || len(again.New) != 0 || len(again.Leased) != 0 {
		t.Fatalf("a redelivered event was recorded again: %+v %v", again, err)
	}
	b.waitDelivered(3)
	as := b.recv.arrivals()
	if got := []string{as[0].EventID, as[1].EventID, as[2].EventID}; !slices.Equal(got, evs) || len(as) != 3 {
		t.Fatalf("arrivals %+v, want %v once each in order", as, evs)
	}
	if waited := time.Since(leasedAt); waited < 700*time.Millisecond {
		t.Fatalf("delivered %s after the lease was taken: before it ran out", waited)
	}
	b.waitNoQueues()
}

// A stored body that echoes the webhook's current challenge, while the webhook no
// longer opts in to the echo (a body recorded before include_challenge was turned
// off, or before migration 0020), is not sent: bodies are never rewritten, and
// sending it would hand out the live key of X-SERVICE-Signature. The delivery is
// FAILED with the reason, and the next event of the aggregate goes on.
func TestBodyEchoingWithdrawnChallengeIsNotSent(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatch.Config{})
	evs := newIDs(2)
	var rows []storage.NewDelivery
	for i, id := range evs {
		echo := secret // the webhook's current challenge
		if i == 1 {
			echo = "an-older-challenge" // rotated away: it signs nothing now, so it is sent
		}
		body, _ := webhooks.Body(topics.WalletTransferEvent, json.RawMessage(`{}`), echo)
		rows = append(rows, storage.NewDelivery{EventID: id, WebhookID: b.webhook, MerchantID: b.merchant,
			Topic: topics.WalletTransferEvent, AggKey: "WALLET-E", Partition: 0, Offset: int64(200 + i), Body: body})
	}
	if _, err := storage.InsertDeliveries(context.Background(), b.db.DB, rows, 0, 0); err != nil {
		t.Fatal(err)
	}
	b.waitDelivered(1)
	if as := b.recv.arrivals(); len(as) != 1 || as[0].EventID != evs[1] {
		t.Fatalf("arrivals %+v, want only %s", as, evs[1])
	}
	var st struct {
		Status    string  `db:"status"`
		LastError *string `db:"last_error"`
	}
	if err := b.db.DB.Get(&st, `SELECT status, last_error FROM webhook_deliveries WHERE event_id = $1`, evs[0]); err != nil {
		t.Fatal(err)
	}
	if st.Status != "FAILED" || st.LastError == nil || *st.LastError != webhooks.WithdrawnChallengeError {
		t.Fatalf("the body echoing the live challenge: %+v", st)
	}
}

// Every attempt records the Standard Webhooks headers it sent, exactly as the
// endpoint received them: a failed attempt, its retry, and a replay (which signs
// afresh), each in its own row in the order they were sent.
func TestAttemptsRecordTheSignaturesSent(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatch.Config{RetryBase: 20 * time.Millisecond, RetryMax: 40 * time.Millisecond})
	ev := newIDs(1)[0]
	b.recv.answer(ev, 500)
	b.send("WALLET-S", ev)
	b.waitDelivered(1)
	ctx := context.Background()
	ds, err := storage.EventDeliveries(ctx, b.db.DB, b.merchant, ev)
	if err != nil || len(ds) != 1 {
		t.Fatalf("deliveries %v, %v", ds, err)
	}
	// A replay a second later carries another webhook-timestamp, so another
	// signature. webhook-timestamp counts whole seconds of the wall clock the
	// dispatcher signs with, so the wait is for that clock to pass the second of
	// the last attempt's timestamp, as the endpoint received it.
	as := b.recv.arrivals()
	last, err := strconv.ParseInt(as[len(as)-1].Headers["webhook-timestamp"], 10, 64)
	if err != nil {
		t.Fatalf("the last attempt's webhook-timestamp: %v", err)
	}
	waittest.Eventually(t, 2*time.Second, func() (bool, string) {
		return time.Now().Unix() > last, fmt.Sprintf("the clock is still in second %d of the last attempt", last)
	})
	if _, err := dispatch.Replay(ctx, b.db.DB, outbound.New(outbound.Options{AllowPrivate: true}), ds[0]); err != nil {
		t.Fatal(err)
	}
	as = b.recv.arrivals()
	var rows []struct {
		storage.Signed
		Status int  `db:"http_status"`
		Replay bool `db:"replay"`
	}
	if err := b.db.DB.Select(&rows, `SELECT signed_id, signed_timestamp, signature, http_status, replay FROM webhook_attempts
		WHERE event_id = $1 ORDER BY attempt_id`, ev); err != nil {
		t.Fatal(err)
	}
	if len(as) != 3 || len(rows) != 3 {
		t.Fatalf("%d arrivals, %d attempts recorded; want 3 of each", len(as), len(rows))
	}
	for i, r := range rows {
		h := as[i].Headers
		if !as[i].Verified || r.ID != ev || r.ID != h["webhook-id"] || r.Timestamp != h["webhook-timestamp"] ||
			r.Signature != h["webhook-signature"] || r.Status != as[i].Status || r.Replay != (i == 2) {
			t.Errorf("attempt %d recorded %+v; the endpoint received %v (answered %d, verified %v)", i, r, h, as[i].Status, as[i].Verified)
		}
	}
	if rows[2].Signature == rows[1].Signature {
		t.Errorf("the replay recorded the earlier attempt's signature %q", rows[1].Signature)
	}
}

// The database drops the dispatcher's connections again and again while events
// stream in: every event is still delivered, in order per aggregate.
func TestDatabaseConnectionsKilled(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatch.Config{RetryBase: 50 * time.Millisecond})
	admin, err := storage.Open(context.Background(), storagetest.URL(t), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	stop := make(chan struct{})
	stopKilling := sync.OnceFunc(func() { close(stop) })
	t.Cleanup(stopKilling) // also when a wait below fails
	killed := make(chan int, 1)
	var passes atomic.Int64 // the killer's passes over the dispatcher's connections
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				killed <- n
				return
			case <-time.After(25 * time.Millisecond):
			}
			var k int
			_ = admin.Get(&k, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, b.db.Name)
			n += k
			passes.Add(1)
		}
	}()
	want := map[string][]string{}
	total := 0
	for round := range 20 {
		mark := passes.Load()
		for _, agg := range []string{"K1", "K2", "K3", "K4"} {
			ids := b.publish(agg, 1+round%3)
			want[agg] = append(want[agg], ids...)
			total += len(ids)
		}
		// Each round's events stream in across a pass of the killer.
		waittest.Eventually(t, 10*time.Second, func() (bool, string) {
			return passes.Load() > mark, fmt.Sprintf("round %d: no pass of the connection killer since its events were published", round)
		})
	}
	stopKilling()
	if n := <-killed; n == 0 {
		t.Fatal("no connection was killed: the test proved nothing")
	}
	b.waitDelivered(total)
	got := b.recv.delivered()
	for agg, ids := range want {
		var seen []string
		for _, id := range got {
			if slices.Contains(ids, id) && !slices.Contains(seen, id) {
				seen = append(seen, id)
			}
		}
		if !slices.Equal(seen, ids) {
			t.Fatalf("aggregate %s:\n got %v\nwant %v", agg, seen, ids)
		}
	}
}

// A slow receiver holds at most its webhook's share of the workers: another
// merchant's events, published after a backlog of the slow one's, go out while the
// slow receiver is still on its first requests.
func TestSlowReceiverDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	// Every event in Kafka before the dispatcher starts (setupIdle): the fast
	// merchant's must all be delivered within the slow receiver's first two
	// answers (3 s).
	b := setupIdle(t, dispatch.Config{Workers: 4}) // PerWebhook: 1
	b.recv.mu.Lock()
	b.recv.delay = 1500 * time.Millisecond // a window wide enough for a busy CI machine
	b.recv.mu.Unlock()
	other, otherHook, fast := "MER"+ids.Alias(9), "WH"+ids.Alias(9), newReceiver(t)
	ctx := context.Background()
	if err := storage.InsertMerchant(ctx, b.db.DB, storage.Merchant{MerchantID: other, Name: "Fast", Environment: "sandbox", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := storage.InsertWebhook(ctx, b.db.DB, storage.Webhook{WebhookID: otherHook, MerchantID: other,
		Endpoint: fast.srv.URL + "/hook", Challenge: secret, SigningSecret: signingKey, IsActive: true, WalletTransferEvent: true,
		CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	var slowIDs []string
	for i := range 5 { // 5 aggregates: 5 queues, more than the 4 workers
		slowIDs = append(slowIDs, b.publish(fmt.Sprintf("SLOW-%d", i), 1)...)
	}
	fastIDs := newIDs(6)
	for i, id := range fastIDs {
		b.sendAs(other, fmt.Sprintf("FAST-%d", i%3), id)
	}
	b.start()
	waittest.Eventually(t, 30*time.Second, func() (bool, string) {
		n := len(fast.delivered())
		return n >= len(fastIDs), fmt.Sprintf("the fast merchant got %d of %d", n, len(fastIDs))
	})
	// With every worker stuck on the slow receiver, it would have taken 4 requests
	// before the fast merchant got any; with its share of one worker, at most 2
	// (the one in flight, and the next) by the time the fast merchant has them all.
	if n := len(b.recv.arrivals()); n > 2 {
		t.Fatalf("the slow receiver had %d requests before the fast merchant got its 6 events", n)
	}
	b.waitDelivered(len(slowIDs) + len(fastIDs))
}

// A dispatcher shut down while it is recording a poll's events (the statement cut
// short by the shutdown) does not commit their offsets on its way out: the next
// dispatcher reads them again and delivers them. Committing what the poll returned,
// as the offsets stood, lost those events for good.
func TestShutdownWhileRecordingLosesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, dispatch.Config{})
	stopFirst := b.run() // a second member; setup's own is stopped at cleanup
	first := newIDs(1)
	b.send("WALLET-S", first...)
	b.waitDelivered(1)

	// Hold the queue table so that recording the next events waits, then shut
	// down every dispatcher while they wait.
	ctx := context.Background()
	tx, err := b.db.DB.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // released below
	if _, err := tx.ExecContext(ctx, `LOCK TABLE webhook_queues IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	later := newIDs(3)
	b.send("WALLET-S", later...)
	waittest.Eventually(t, 20*time.Second, func() (bool, string) {
		var waiting int
		if err := b.db.DB.GetContext(ctx, &waiting, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO webhook_deliveries%'`, b.db.Name); err != nil {
			t.Fatal(err)
		}
		return waiting > 0, "no dispatcher started recording the events"
	})
	stopFirst()
	b.stop()
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}

	// The next dispatcher delivers them.
	t.Cleanup(b.run())
	b.waitDelivered(4)
	got := b.recv.delivered()
	for _, id := range later {
		if !slices.Contains(got, id) {
			t.Fatalf("event %s was never delivered: %v", id, got)
		}
	}
}
