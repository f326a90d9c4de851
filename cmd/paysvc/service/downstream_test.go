package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage"
	"paysvc/topics"
	"paysvc/topics/kafkatest"
)

// A downstream system reads the documented event topics (docs/events) with a
// standard Kafka client, Debian's kcat (librdkafka), as a member of a consumer
// group on the real cluster: every record is what docs/events says (the envelope
// and its payload validate against the committed JSON Schemas, the record key is
// the aggregate id, the headers repeat the envelope, one aggregate's events are
// on one partition in order, ids are unique or exact redeliveries), and a
// consumer that stops and starts again in its group resumes from the offsets it
// committed on exit: it gets exactly the events published since, none of the
// first run's again and none missing.
//
// How kcat is run (Debian's kcat 1.7.1 on librdkafka 2.0.2; see its kcat.c):
//   - -G <group> <topic>...: the high-level consumer. librdkafka's defaults
//     enable.auto.commit=true and enable.auto.offset.store=true hold: the
//     offset of every message handed to kcat is stored, committed every 5 s,
//     and committed once more when kcat leaves its loop (-e, -c N, SIGINT or
//     SIGTERM): rd_kafka_consumer_close unassigns, commits and waits for the
//     OffsetCommit answer before kcat exits. (A signal is the weak one: a
//     message librdkafka hands over as it lands is stored, so committed, but
//     kcat's consume_cb drops it unprinted once the run flag is down.) kcat's
//     -X cannot change either: it tries the topic configuration first, so
//     -X enable.auto.commit=... and -X auto.commit.interval.ms=... set
//     librdkafka's legacy topic properties (auto.commit.enable, a CONFWARN on
//     stderr), which the high-level consumer ignores (kcat -X dump shows the
//     global ones unchanged).
//   - -X auto.offset.reset=earliest (a topic property, so it does apply), NOT
//     -o beginning: in -G mode kcat sets -o's offset on every partition of
//     every assignment, overriding the committed offsets, so a consumer
//     restarted with -o beginning reads everything again. auto.offset.reset
//     applies only where the group has no committed offset.
//   - -e: -G honours it since kcat 1.7.0, ending the loop once every assigned
//     partition reached its end; close commits; kcat exits 0. The test waits
//     until the relay published everything first (the outbox is empty), so
//     the end is the batch's. (-c N would do, but a redelivered event would
//     make the count wrong.)
//   - -J: one JSON object a record, with topic, partition, offset, headers,
//     key and the value as a string.
func TestDownstreamConsumerWithKcat(t *testing.T) {
	if !kafkatest.Real() {
		t.Skip("downstream kcat consumer: needs the real Apache Kafka cluster (PAYSVC_TEST_KAFKA_BROKERS, as make test sets); " +
			"a standard client against the embedded kfake broker would not say what downstream systems see in production")
	}
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat is not installed (make kcat, or apt-get install -y kcat): %v", err)
	}
	t.Parallel()
	if out, err := exec.Command(kcat, "-V").CombinedOutput(); err == nil {
		t.Logf("%s", bytes.TrimSpace(out))
	}

	env := servicetest.Start(t, nil)
	schemas := loadEventSchemas(t)
	// The documented topics this consumer reads, as named on the cluster (the
	// service's namespace), and the envelope type each one carries.
	typeOfTopic := map[string]string{}
	var eventTopics []string
	for _, typ := range []string{topics.WalletTransferEvent, topics.CollectionEvent} {
		name := env.Topic(topics.EventTopics[typ])
		typeOfTopic[name] = typ
		eventTopics = append(eventTopics, name)
	}
	// The group is in the service's namespace: unique on the shared cluster,
	// and deleted with the namespace when the test ends.
	group := env.Config.KafkaNamespace.Group("downstream-kcat")
	brokers := strings.Join(env.Svc.Brokers, ",")

	adm := env.Admin()

	ms := []*dsMerchant{newDSMerchant(t, env, "Downstream A"), newDSMerchant(t, env, "Downstream B")}
	dc := &dsConsumer{t: t, env: env, adm: adm, schemas: schemas, typeOfTopic: typeOfTopic, merchants: ms,
		seen: map[string]dsSeen{}, partitions: map[string]int{}}

	// Batch 1: transfers from both merchants' settlement wallets (interleaved,
	// so the two aggregates share partitions or not, as the hash falls) and a
	// paid STK push each: events on wallet_transfer and collection.
	want1 := dsWork(t, env, ms, "b1", 6, []string{"254722100011", "254733100012"})
	end1 := dc.published(eventTopics)
	recs1 := runKcat(t, kcat, brokers, group, eventTopics)
	dc.check("first run", recs1, nil, end1, want1)
	dc.committed(group, eventTopics, end1)

	// Batch 2, after the consumer stopped: more transfers, a paid and a
	// cancelled STK push (failed_reason and failed_code are strings then).
	want2 := dsWork(t, env, ms, "b2", 5, []string{"254722100013", "254733100001"})
	end2 := dc.published(eventTopics)
	recs2 := runKcat(t, kcat, brokers, group, eventTopics)
	dc.check("second run", recs2, end1, end2, want2)
	dc.committed(group, eventTopics, end2)
}

// dsMerchant is a merchant of the downstream test: its settlement wallet (the
// origin of its transfers) and a second wallet they go to.
type dsMerchant struct {
	id, name   string
	auth       []string
	settlement string
	dest       string
}

func newDSMerchant(t *testing.T, env *servicetest.Env, name string) *dsMerchant {
	t.Helper()
	created := env.Merchant(name)
	m := &dsMerchant{id: created.MerchantID, name: name, auth: servicetest.Bearer(created.SecretKey)}
	var list struct{ Results []map[string]any }
	env.Do("GET", "/api/v1/wallets/", nil, m.auth...).JSON(t, &list)
	for _, w := range list.Results {
		if w["wallet_type"] == "SETTLEMENT" {
			m.settlement, _ = w["wallet_id"].(string)
		}
	}
	if m.settlement == "" {
		t.Fatalf("%s: no settlement wallet in %v", name, list.Results)
	}
	r := m.do(t, env, "POST", "/api/v1/wallets/", map[string]any{"currency": "KES", "label": "Downstream"}, "wallet")
	if r.Status != 201 {
		t.Fatalf("%s: create wallet: %d %s", name, r.Status, r.Body)
	}
	m.dest = r.Map(t)["wallet_id"].(string)
	// A sandbox deposit funds the transfers (it is no event of its own).
	if r := m.do(t, env, "POST", "/api/v1/sandbox/wallets/"+m.settlement+"/deposit/", map[string]any{"amount": "1000.00"}, "deposit"); r.Status != 200 {
		t.Fatalf("%s: deposit: %d %s", name, r.Status, r.Body)
	}
	return m
}

// do sends a request as the merchant until its outcome is known, as a careful
// client does: a write carries an Idempotency-Key (idem, "" for a read) and is
// sent again with it after a 5xx (a 504 says the command was accepted and its
// outcome is not known yet: under load a reply can take longer than the API
// waits), a 409 (the same key in flight) or a 429. A retried write is applied
// once, and its events have the same ids.
func (m *dsMerchant) do(t *testing.T, env *servicetest.Env, method, path string, body any, idem string) servicetest.Response {
	t.Helper()
	headers := m.auth
	if idem != "" {
		headers = append(slices.Clone(m.auth), "Idempotency-Key", m.id+" "+idem)
	}
	var r servicetest.Response
	waittest.Eventually(t, 2*time.Minute, func() (bool, string) {
		if r.Status != 0 {
			t.Logf("%s: %s %s: %d, sending it again: %.200s", m.name, method, path, r.Status, r.Body)
		}
		r = env.Do(method, path, body, headers...)
		return r.Status < 500 && r.Status != http.StatusConflict && r.Status != http.StatusTooManyRequests,
			fmt.Sprintf("%s: %s %s: no definite answer in 2m, last %d %s", m.name, method, path, r.Status, r.Body)
	})
	return r
}

// dsTransfer is a transfer the test made, found in its event by the narrative.
type dsTransfer struct {
	m   *dsMerchant
	seq int
}

// dsBatch is what one batch of work must have published.
type dsBatch struct {
	transfers map[string]dsTransfer // by narrative
	invoices  map[string]string     // invoice id -> its final state
	merchant  map[string]*dsMerchant
}

// dsWork makes n transfers per merchant (round robin, each to the merchant's
// second wallet, with a narrative naming it) and one STK push per merchant
// with the given phone numbers, and waits until every invoice is final.
func dsWork(t *testing.T, env *servicetest.Env, ms []*dsMerchant, batch string, n int, phones []string) dsBatch {
	t.Helper()
	b := dsBatch{transfers: map[string]dsTransfer{}, invoices: map[string]string{}, merchant: map[string]*dsMerchant{}}
	for i := 0; i < n; i++ {
		for _, m := range ms {
			narrative := fmt.Sprintf("downstream %s %s #%02d", batch, m.id, i)
			r := m.do(t, env, "POST", "/api/v1/wallets/"+m.settlement+"/intra_transfer/",
				map[string]any{"wallet_id": m.dest, "amount": "1.00", "narrative": narrative}, narrative)
			if r.Status != 200 {
				t.Fatalf("%s: transfer %s: %d %s", m.name, narrative, r.Status, r.Body)
			}
			b.transfers[narrative] = dsTransfer{m: m, seq: i}
		}
	}
	for i, m := range ms {
		r := m.do(t, env, "POST", "/api/v1/payment/mpesa-stk-push/", map[string]any{"phone_number": phones[i], "amount": "10",
			"api_ref": "downstream-" + batch}, "stk "+batch)
		if r.Status != 200 {
			t.Fatalf("%s: stk push: %d %s", m.name, r.Status, r.Body)
		}
		id := r.Map(t)["invoice"].(map[string]any)["invoice_id"].(string)
		b.invoices[id] = ""
		b.merchant[id] = m
	}
	deadline := time.Now().Add(90 * time.Second) // one bound for all the invoices together
	for id := range b.invoices {
		m := b.merchant[id]
		waittest.Eventually(t, time.Until(deadline), func() (bool, string) {
			r := m.do(t, env, "POST", "/api/v1/payment/status/", map[string]any{"invoice_id": id}, "")
			if r.Status != 200 {
				t.Fatalf("status of %s: %d %s", id, r.Status, r.Body)
			}
			s, _ := r.Map(t)["invoice"].(map[string]any)["state"].(string)
			if s == "COMPLETE" || s == "FAILED" {
				b.invoices[id] = s
				return true, ""
			}
			return false, fmt.Sprintf("invoice %s still %q after 90s", id, s)
		})
	}
	return b
}

// kcatRecord is one line of kcat -J.
type kcatRecord struct {
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Headers   []*string `json:"headers"` // name, value, name, value...
	Key       *string   `json:"key"`
	Payload   *string   `json:"payload"`
}

func (r kcatRecord) String() string { return fmt.Sprintf("%s[%d]@%d", r.Topic, r.Partition, r.Offset) }

// header is the value of the record's header name ("" and false if absent or
// repeated).
func (r kcatRecord) header(name string) (string, bool) {
	var v string
	n := 0
	for i := 0; i+1 < len(r.Headers); i += 2 {
		if r.Headers[i] != nil && *r.Headers[i] == name {
			n++
			if r.Headers[i+1] != nil {
				v = *r.Headers[i+1]
			}
		}
	}
	return v, n == 1
}

// runKcat runs one kcat consumer in group until it reached the end of every
// partition assigned to it (-e), and returns what it printed. It fails the test
// unless kcat exited 0 by itself within the time limit.
func runKcat(t *testing.T, kcat, brokers, group string, eventTopics []string) []kcatRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"-b", brokers, "-G", group, "-X", "auto.offset.reset=earliest", "-X", "client.id=" + group, "-e", "-J", "-q"}
	cmd := exec.CommandContext(ctx, kcat, append(args, eventTopics...)...)
	// On the time limit, the way an operator stops it (kcat commits and
	// exits on SIGTERM); SIGKILL only if that does not end it.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t.Logf("running kcat %s", strings.Join(append(args, eventTopics...), " "))
	start := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("kcat did not reach the end of its partitions within 2m (%v)\nstderr:\n%s\nstdout:\n%s", err, stderr.Bytes(), stdout.Bytes())
	}
	if err != nil {
		t.Fatalf("kcat: %v\nstderr:\n%s", err, stderr.Bytes())
	}
	t.Logf("kcat exited after %v: %d bytes of output", time.Since(start).Round(time.Millisecond), stdout.Len())
	var out []kcatRecord
	for line := range bytes.Lines(stdout.Bytes()) {
		if line = bytes.TrimSpace(line); len(line) == 0 {
			continue
		}
		var r kcatRecord
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("kcat -J printed a line that is not JSON: %v: %s", err, line)
		}
		out = append(out, r)
	}
	return out
}

// dsSeen is a unique event: where it was first read, its bytes and envelope.
type dsSeen struct {
	at  kcatRecord
	raw string
}

// dsConsumer checks what kcat read, across runs.
type dsConsumer struct {
	t           *testing.T
	env         *servicetest.Env
	adm         *kadm.Client
	schemas     *eventSchemas
	typeOfTopic map[string]string
	merchants   []*dsMerchant
	seen        map[string]dsSeen // event id -> first read
	partitions  map[string]int    // topic -> its partition count
}

// published waits until the relay published every event committed so far (the
// outbox is empty: it deletes a row only once Kafka acknowledged its records)
// and returns the end offsets of the topics then.
func (dc *dsConsumer) published(eventTopics []string) map[string]map[int32]int64 {
	t := dc.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctxDeadline, _ := ctx.Deadline() // the backlog shares the reads' bound
	waittest.Eventually(t, time.Until(ctxDeadline), func() (bool, string) {
		n, err := storage.OutboxBacklog(ctx, dc.env.Schema.DB)
		if err != nil {
			t.Fatal(err)
		}
		return n == 0, fmt.Sprintf("the relay left %d events unpublished for 60s", n)
	})
	var dead int
	if err := dc.env.Schema.DB.GetContext(ctx, &dead, `SELECT count(*) FROM outbox_dead`); err != nil {
		t.Fatal(err)
	}
	if dead != 0 {
		t.Fatalf("%d events were dead-lettered instead of published", dead)
	}
	ends, err := dc.adm.ListEndOffsets(ctx, eventTopics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("end offsets: %v", err)
	}
	starts, err := dc.adm.ListStartOffsets(ctx, eventTopics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatalf("start offsets: %v", err)
	}
	out := map[string]map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]int64{}
		}
		out[o.Topic][o.Partition] = o.Offset
	})
	starts.Each(func(o kadm.ListedOffset) {
		if o.Offset != 0 {
			t.Fatalf("%s[%d] starts at %d: the test needs the whole topic", o.Topic, o.Partition, o.Offset)
		}
	})
	for _, topic := range eventTopics {
		dc.partitions[topic] = len(out[topic])
		if len(out[topic]) != 4 {
			t.Errorf("%s has %d partitions, docs/events says 4", topic, len(out[topic]))
		}
	}
	return out
}

// check verifies one kcat run: it read exactly the records from offsets from
// (nil: the beginning) to to, every record is as docs/events documents it, and
// the new events are exactly the batch's.
func (dc *dsConsumer) check(run string, recs []kcatRecord, from, to map[string]map[int32]int64, want dsBatch) {
	t := dc.t
	t.Helper()
	// Exactly the records between the two positions, each once: none the
	// group had already committed, none skipped. The relay's producer is
	// idempotent and not transactional, so offsets are contiguous.
	got := map[string]map[int32][]int64{}
	for _, r := range recs {
		if got[r.Topic] == nil {
			got[r.Topic] = map[int32][]int64{}
		}
		got[r.Topic][r.Partition] = append(got[r.Topic][r.Partition], r.Offset)
	}
	total := 0
	for topic, parts := range to {
		for p, end := range parts {
			start := from[topic][p]
			var wantOffs []int64
			for o := start; o < end; o++ {
				wantOffs = append(wantOffs, o)
			}
			total += len(wantOffs)
			offs := got[topic][p]
			if !slices.IsSorted(offs) {
				t.Errorf("%s: %s[%d] was read out of order: %v", run, topic, p, offs)
				slices.Sort(offs)
			}
			if !slices.Equal(offs, wantOffs) {
				t.Errorf("%s: %s[%d]: kcat read offsets %v, want [%d, %d)", run, topic, p, offs, start, end)
			}
		}
	}
	for topic := range got {
		if _, ok := to[topic]; !ok {
			t.Errorf("%s: kcat read topic %s, not subscribed", run, topic)
		}
	}
	if len(recs) != total {
		t.Errorf("%s: kcat read %d records, the topics got %d since the last run", run, len(recs), total)
	}
	t.Logf("%s: %d records", run, len(recs))

	// Every record, as documented; the events new in this run.
	var fresh []dsEvent
	for _, r := range recs {
		ev, ok := dc.record(run, r)
		if !ok {
			continue
		}
		if prev, dup := dc.seen[ev.ID]; dup {
			// At least once: a redelivery is the same event, byte for byte.
			// (The same record read twice is the offsets' error above.)
			if prev.at.Topic == r.Topic && prev.at.Partition == r.Partition && prev.at.Offset == r.Offset {
				t.Errorf("%s: %s was read again: it was before the group's committed offset", run, r)
			} else if prev.raw != *r.Payload {
				t.Errorf("%s: event id %s at %s and %s with different contents:\n%s\n%s", run, ev.ID, prev.at, r, prev.raw, *r.Payload)
			} else {
				t.Logf("%s: %s redelivers event %s of %s", run, r, ev.ID, prev.at)
			}
			continue
		}
		dc.seen[ev.ID] = dsSeen{at: r, raw: *r.Payload}
		fresh = append(fresh, ev)
	}
	dc.batch(run, fresh, want)
}

// dsEvent is a decoded, checked record.
type dsEvent struct {
	topics.Event
	rec      kcatRecord
	transfer topics.WalletTransfer
	invoice  topics.Collection
}

// moneyPattern is docs/events/README.md's money: "a decimal string with two
// places".
var moneyPattern = regexp.MustCompile(`^-?[0-9]+\.[0-9]{2}$`)

// record checks one record against docs/events and decodes it.
func (dc *dsConsumer) record(run string, r kcatRecord) (dsEvent, bool) {
	t := dc.t
	t.Helper()
	bad := func(format string, args ...any) {
		t.Helper()
		t.Errorf("%s: %s: %s", run, r, fmt.Sprintf(format, args...))
	}
	typ := dc.typeOfTopic[r.Topic]
	if r.Payload == nil || r.Key == nil {
		bad("a record without a value or key (key %v)", r.Key)
		return dsEvent{}, false
	}
	value := []byte(*r.Payload)
	// The envelope and the payload against the committed schemas (a real
	// validator, formats asserted), and no field the schemas do not document.
	if !dc.schemas.valid(t, run+": "+r.String()+": envelope", "event.schema.json", value) {
		return dsEvent{}, false
	}
	var ev dsEvent
	if err := json.Unmarshal(value, &ev.Event); err != nil {
		bad("envelope: %v", err)
		return dsEvent{}, false
	}
	ev.rec = r
	if ev.Type != typ {
		bad("type %q on the topic of %q", ev.Type, typ)
		return dsEvent{}, false
	}
	file := map[string]string{topics.WalletTransferEvent: "wallet_transfer_event.schema.json",
		topics.CollectionEvent: "collection_event.schema.json"}[typ]
	if !dc.schemas.valid(t, run+": "+r.String()+": payload", file, ev.Payload) {
		return dsEvent{}, false
	}
	if ev.Version != 1 {
		bad("envelope version %d on a v1 topic", ev.Version)
	}
	// Record key, envelope key, headers.
	if *r.Key != ev.Key {
		bad("record key %q, envelope key %q", *r.Key, ev.Key)
	}
	// The key decides the partition as Kafka's default partitioner does
	// (murmur2), so every relay instance puts an aggregate on the same one,
	// and a consumer can tell where an aggregate's events are.
	if n := dc.partitions[r.Topic]; n > 0 {
		if want := kgo.StickyKeyPartitioner(nil).ForTopic(r.Topic).Partition(&kgo.Record{Key: []byte(*r.Key)}, n); int32(want) != r.Partition {
			bad("key %q is on partition %d, Kafka's default partitioner puts it on %d", *r.Key, r.Partition, want)
		}
	}
	if h, ok := r.header("event_id"); !ok || h != ev.ID {
		bad("header event_id %q (present once: %v), envelope id %q", h, ok, ev.ID)
	}
	if h, ok := r.header("merchant_id"); !ok || h != ev.MerchantID {
		bad("header merchant_id %q (present once: %v), envelope merchant_id %q", h, ok, ev.MerchantID)
	}
	var m *dsMerchant
	for _, x := range dc.merchants {
		if x.id == ev.MerchantID {
			m = x
		}
	}
	if m == nil {
		bad("merchant_id %q is none of the test's merchants", ev.MerchantID)
		return dsEvent{}, false
	}
	// Timestamps are RFC 3339 in UTC (README).
	utc := func(field string, at time.Time, raw string) {
		if at.Location() != time.UTC || !strings.HasSuffix(raw, "Z") {
			bad("%s %s is not in UTC", field, raw)
		}
	}
	var rawTimes map[string]json.RawMessage
	_ = json.Unmarshal(value, &rawTimes)
	utc("occurred_at", ev.OccurredAt, strings.Trim(string(rawTimes["occurred_at"]), `"`))
	var rawPayload map[string]json.RawMessage
	_ = json.Unmarshal(ev.Payload, &rawPayload)
	raw := func(f string) string { return strings.Trim(string(rawPayload[f]), `"`) }
	money := func(field, v string) {
		if !moneyPattern.MatchString(v) {
			bad("%s %q is not money as documented (a decimal string with two places)", field, v)
		}
	}
	switch typ {
	case topics.WalletTransferEvent:
		if err := json.Unmarshal(ev.Payload, &ev.transfer); err != nil {
			bad("payload: %v", err)
			return dsEvent{}, false
		}
		p := ev.transfer
		// The key is the aggregate id: the origin wallet.
		if ev.Key != p.OriginWallet {
			bad("key %q, origin_wallet_id %q: the documented key is the origin wallet", ev.Key, p.OriginWallet)
		}
		if p.OriginWallet != m.settlement || p.DestinationWallet != m.dest {
			bad("transfer %s -> %s is not one of merchant %s's (%s -> %s)", p.OriginWallet, p.DestinationWallet, m.id, m.settlement, m.dest)
		}
		money("amount_sent", p.AmountSent)
		money("amount_received", p.AmountReceived)
		utc("created_at", p.CreatedAt, raw("created_at"))
	case topics.CollectionEvent:
		if err := json.Unmarshal(ev.Payload, &ev.invoice); err != nil {
			bad("payload: %v", err)
			return dsEvent{}, false
		}
		p := ev.invoice
		// The key is the aggregate id: the invoice.
		if ev.Key != p.InvoiceID || p.ID != p.InvoiceID {
			bad("key %q, invoice_id %q, id %q: the documented key is the invoice id", ev.Key, p.InvoiceID, p.ID)
		}
		money("value", p.Value)
		money("charges", p.Charges)
		money("net_amount", p.NetAmount)
		utc("created_at", p.CreatedAt, raw("created_at"))
		utc("updated_at", p.UpdatedAt, raw("updated_at"))
	}
	return ev, true
}

// collectionRank orders an invoice's states as its events must come.
var collectionRank = map[string]int{"PENDING": 0, "PROCESSING": 1, "COMPLETE": 2, "FAILED": 2}

// batch checks the events new in a run: exactly the batch's transfers and
// invoices, and each aggregate's on one partition, in order.
func (dc *dsConsumer) batch(run string, fresh []dsEvent, want dsBatch) {
	t := dc.t
	t.Helper()
	byKey := map[string][]dsEvent{}
	transfers := map[string]dsEvent{}
	for _, ev := range fresh {
		k := ev.rec.Topic + "\x00" + ev.Key
		byKey[k] = append(byKey[k], ev)
		switch ev.Type {
		case topics.WalletTransferEvent:
			n := ev.transfer.Narrative
			if _, ok := want.transfers[n]; !ok {
				t.Errorf("%s: %s: transfer event %q is not one of this batch's", run, ev.rec, n)
			}
			if prev, ok := transfers[n]; ok {
				t.Errorf("%s: transfer %q has two events, %s (%s) and %s (%s)", run, n, prev.ID, prev.rec, ev.ID, ev.rec)
			}
			transfers[n] = ev
		case topics.CollectionEvent:
			if _, ok := want.invoices[ev.Key]; !ok {
				t.Errorf("%s: %s: collection event of invoice %s, not one of this batch's", run, ev.rec, ev.Key)
			} else if m := want.merchant[ev.Key]; ev.MerchantID != m.id {
				t.Errorf("%s: %s: invoice %s of merchant %s has merchant_id %s", run, ev.rec, ev.Key, m.id, ev.MerchantID)
			}
		}
	}
	for n, tr := range want.transfers {
		ev, ok := transfers[n]
		switch {
		case !ok:
			t.Errorf("%s: no event for transfer %q", run, n)
		case ev.MerchantID != tr.m.id || ev.transfer.AmountSent != "1.00" || ev.transfer.AmountReceived != "1.00" ||
			ev.transfer.Status != "COMPLETE" || ev.transfer.FromCurrency != "KES" || ev.transfer.ToCurrency != "KES":
			t.Errorf("%s: transfer %q: event %+v", run, n, ev.transfer)
		}
	}
	for id, final := range want.invoices {
		evs := byKey[dc.env.Topic(topics.EventTopics[topics.CollectionEvent])+"\x00"+id]
		if len(evs) == 0 {
			t.Errorf("%s: no collection_event for invoice %s", run, id)
			continue
		}
		if first, last := evs[0].invoice.State, evs[len(evs)-1].invoice.State; first != "PENDING" || last != final {
			t.Errorf("%s: invoice %s's events go from %s to %s, want PENDING (its creation) to %s", run, id, first, last, final)
		}
		if final == "FAILED" {
			last := evs[len(evs)-1].invoice
			if last.FailedReason == nil || last.FailedCode == nil {
				t.Errorf("%s: failed invoice %s: failed_reason %v, failed_code %v", run, id, last.FailedReason, last.FailedCode)
			}
		}
	}
	// One aggregate: one partition, its events in the order they happened
	// (kcat printed each partition in offset order, checked above).
	for _, evs := range byKey {
		for i, ev := range evs {
			if ev.rec.Partition != evs[0].rec.Partition {
				t.Errorf("%s: events of %s on partitions %d (%s) and %d (%s)", run, ev.Key, evs[0].rec.Partition, evs[0].rec, ev.rec.Partition, ev.rec)
			}
			if i == 0 {
				continue
			}
			prev := evs[i-1]
			if ev.OccurredAt.Before(prev.OccurredAt) {
				t.Errorf("%s: %s occurred at %v, before %s (%v)", run, ev.rec, ev.OccurredAt, prev.rec, prev.OccurredAt)
			}
			switch ev.Type {
			case topics.WalletTransferEvent:
				if a, b := want.transfers[prev.transfer.Narrative].seq, want.transfers[ev.transfer.Narrative].seq; b <= a {
					t.Errorf("%s: transfer #%d of wallet %s at %s after #%d at %s", run, b, ev.Key, ev.rec, a, prev.rec)
				}
			case topics.CollectionEvent:
				if collectionRank[ev.invoice.State] <= collectionRank[prev.invoice.State] || ev.invoice.UpdatedAt.Before(prev.invoice.UpdatedAt) {
					t.Errorf("%s: invoice %s is %s (updated %v) at %s after %s (updated %v) at %s", run, ev.Key,
						ev.invoice.State, ev.invoice.UpdatedAt, ev.rec, prev.invoice.State, prev.invoice.UpdatedAt, prev.rec)
				}
			}
		}
	}
}

// committed checks the group's committed offsets (kadm) against the end offsets
// the run read to: kcat committed all it read when it exited.
func (dc *dsConsumer) committed(group string, eventTopics []string, end map[string]map[int32]int64) {
	t := dc.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	offs, err := dc.adm.FetchOffsets(ctx, group)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		t.Fatalf("committed offsets of %s: %v", group, err)
	}
	for _, topic := range eventTopics {
		for p, e := range end[topic] {
			o, ok := offs.Lookup(topic, p)
			switch {
			case !ok && e == 0: // nothing to read yet: nothing to commit
			case !ok:
				t.Errorf("group %s has no committed offset for %s[%d], end %d", group, topic, p, e)
			case o.At != e:
				t.Errorf("group %s committed %s[%d] at %d, its end is %d", group, topic, p, o.At, e)
			}
		}
	}
	// Nothing beyond the subscribed topics.
	offs.Each(func(o kadm.OffsetResponse) {
		if !slices.Contains(eventTopics, o.Topic) {
			t.Errorf("group %s committed %s[%d], not subscribed", group, o.Topic, o.Partition)
		}
	})
}

// eventSchemas are docs/events' committed schemas, compiled by a JSON Schema
// validator (santhosh-tekuri/jsonschema, draft 2020-12, formats asserted).
type eventSchemas struct {
	compiled map[string]*jsonschema.Schema
	props    map[string]map[string]bool // the properties each schema documents
}

func loadEventSchemas(t *testing.T) *eventSchemas {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "docs", "events"))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	s := &eventSchemas{compiled: map[string]*jsonschema.Schema{}, props: map[string]map[string]bool{}}
	for _, file := range []string{"event.schema.json", "wallet_transfer_event.schema.json", "collection_event.schema.json"} {
		path := filepath.Join(dir, file)
		sch, err := c.Compile(path)
		if err != nil {
			t.Fatalf("compile %s: %v", path, err)
		}
		s.compiled[file] = sch
		var doc struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		s.props[file] = map[string]bool{}
		for k := range doc.Properties {
			s.props[file][k] = true
		}
		// Not a validator that accepts anything: every one of these schemas
		// has required fields.
		if len(doc.Required) == 0 || sch.Validate(map[string]any{}) == nil {
			t.Fatalf("%s: an empty object validates (required: %v)", path, doc.Required)
		}
	}
	return s
}

// valid validates doc against the schema file and reports, as an error, every
// field the schema does not document (the schemas allow additional properties
// for compatibility, but on the wire today everything must be in docs/events).
func (s *eventSchemas) valid(t *testing.T, at, file string, doc []byte) bool {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Errorf("%s: not JSON: %v: %s", at, err, doc)
		return false
	}
	if err := s.compiled[file].Validate(inst); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			t.Errorf("%s does not validate against docs/events/%s: %v\n%s", at, file, ve, doc)
		} else {
			t.Errorf("%s: %s: %v", at, file, err)
		}
		return false
	}
	obj, _ := inst.(map[string]any)
	var extra []string
	for k := range obj {
		if !s.props[file][k] {
			extra = append(extra, strconv.Quote(k))
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		t.Errorf("%s: fields %s are on the wire but not in docs/events/%s", at, strings.Join(extra, ", "), file)
	}
	return true
}
