package dispatch

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/outbound/webhooks"
	"paysvc/storage"
	"paysvc/topics"
	"paysvc/topics/inproc"
	"paysvc/topics/tracing"
)

// group is the dispatchers' consumer group over the event topics (logical:
// Config.Namespace prefixes it on the cluster).
const group = "paysvc-dispatcher"

// maxPollRecords bounds one batch of events, so one batch is one quick transaction
// and a rebalance never waits long for the poll it is blocked on.
const maxPollRecords = 2000

// ingest records one delivery per subscribed webhook for every event, one
// statement per poll, and commits offsets only up to what is recorded. A poll that
// cannot be recorded (database down) is read again from its first record.
//
// Rebalances are blocked while a poll is being recorded (BlockRebalanceOnPoll), and
// a partition's offset is committed when it is revoked, so its next owner starts
// exactly after what this member recorded: never after a record it did not record,
// and without redoing what it did.
func (d *Dispatcher) ingest(ctx context.Context, brokers []string) error {
	ns := d.cfg.Namespace
	var ts []string
	for _, t := range topics.EventTopics {
		ts = append(ts, ns.Topic(t))
	}
	commit := func(ctx context.Context, cl *kgo.Client) {
		if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
			d.log.Warn("commit event offsets", "err", err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.Dialer(inproc.Dial), kgo.ConsumerGroup(ns.Group(group)), kgo.ConsumeTopics(ts...),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) { commit(ctx, cl) }),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ClientID("paysvc-dispatcher"),
		kgo.SessionTimeout(d.cfg.SessionTimeout), kgo.HeartbeatInterval(d.cfg.SessionTimeout/5),
		// How long a rebalance waits for the members to rejoin. A member rejoins
		// once the poll it is recording is written (BlockRebalanceOnPoll), one
		// short transaction, so a member that has not rejoined within this is
		// gone, and the others should not stop ingesting for kgo's default 60 s
		// meanwhile (Apache Kafka waits that long for a member that is alive but
		// stuck). It also bounds how long a member waits in a join the
		// coordinator never answers: kfake (the embedded broker) can drop a member
		// waiting in JoinGroup when another member dies during a cooperative
		// rebalance, and kgo then waits this long before joining again. It stays
		// for both reasons (docs/cluster.md, "Running on Apache Kafka").
		kgo.RebalanceTimeout(rebalanceTimeout(d.cfg.SessionTimeout)),
		kgo.FetchMaxWait(time.Second))
	if err != nil {
		return err
	}
	defer func() { _ = topics.CloseGroupClient(cl) }() // a member that cannot leave is expired by the group
	defer func() {                                     // what was recorded since the last commit
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		commit(cctx, cl)
	}()
	var lastCommit time.Time
	// The lease token of the poll being recorded, kept until it is recorded: a
	// recording whose answer was lost (the connection dropped after the commit) may
	// have leased new queues under it, and the next try frees them
	// (storage.InsertDeliveriesAs) instead of leaving them to sit out their lease
	// with nobody sending them.
	var token int64
	for {
		fetches := cl.PollRecords(ctx, maxPollRecords)
		recs := fetches.Records()
		if len(recs) == 0 {
			cl.AllowRebalance()
			if ctx.Err() != nil || fetches.IsClientClosed() {
				return nil
			}
			continue
		}
		// A poll moves the offsets that the commits (on the way out, and when
		// partitions are revoked) write past its records, so every record polled is
		// either recorded or rewound: one dropped here would never be read again.
		// Records that arrived as shutdown began are recorded all the same, within a
		// bound (the drain).
		rctx, cancel := ctx, context.CancelFunc(func() {})
		if ctx.Err() != nil {
			rctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), shutdownRecord)
		}
		err := d.record(rctx, recs, &token)
		cancel()
		if err == nil {
			token = 0
		} else {
			cl.SetOffsets(firstOffsets(recs))
			cl.AllowRebalance()
			if ctx.Err() != nil {
				return nil
			}
			d.log.Warn("record deliveries; the events are read again", "events", len(recs), "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		// Offsets are committed every commitEvery, not every poll (a commit is a
		// round trip to the coordinator): a dispatcher that dies re-reads at most that
		// much, and the redelivered events are ignored.
		if time.Since(lastCommit) >= commitEvery && ctx.Err() == nil {
			commit(ctx, cl)
			lastCommit = time.Now()
		}
		cl.AllowRebalance()
		if ctx.Err() != nil {
			return nil
		}
	}
}

// event is an event record decoded, with the record it came from.
type event struct {
	ev  topics.Event
	rec *kgo.Record
}

// shutdownRecord bounds the recording of events polled as shutdown began.
const shutdownRecord = 5 * time.Second

// commitEvery is how often the ingest commits its Kafka offsets.
const commitEvery = 250 * time.Millisecond

// rebalanceTimeout is three session timeouts, at least 10 s.
func rebalanceTimeout(session time.Duration) time.Duration { return max(3*session, 10*time.Second) }

// firstOffsets is where each partition of recs starts: seeking there reads them
// again. It is keyed by the records' topics as the cluster names them.
func firstOffsets(recs []*kgo.Record) map[string]map[int32]kgo.EpochOffset {
	out := map[string]map[int32]kgo.EpochOffset{}
	for _, r := range recs {
		if out[r.Topic] == nil {
			out[r.Topic] = map[int32]kgo.EpochOffset{}
		}
		if _, ok := out[r.Topic][r.Partition]; !ok {
			out[r.Topic][r.Partition] = kgo.EpochOffset{Epoch: -1, Offset: r.Offset}
		}
	}
	return out
}

// record stores the deliveries of a batch of event records in one statement.
// token is the poll's lease token (drawn here when 0).
func (d *Dispatcher) record(ctx context.Context, recs []*kgo.Record, token *int64) error {
	// The merchant of each event comes from the record's merchant_id header (the
	// relay sets it from the outbox row), so that events of merchants without
	// webhooks, nearly all of them under load, are never decoded: decoding every
	// event was 2-4% of the service's CPU in the transfer benchmarks. A record
	// without the header (another producer) is decoded to find its merchant.
	type pending struct {
		rec      *kgo.Record
		merchant string
		ev       *topics.Event // decoded already (no header)
	}
	all := make([]pending, 0, len(recs))
	var merchants []string
	seen := map[string]bool{}
	for _, r := range recs {
		p := pending{rec: r, merchant: header(r, "merchant_id")}
		if p.merchant == "" {
			var ev topics.Event
			if err := json.Unmarshal(r.Value, &ev); err != nil || ev.ID == "" {
				d.log.Error("undecodable event skipped", "topic", d.cfg.Namespace.Logical(r.Topic), "offset", r.Offset)
				continue
			}
			p.ev, p.merchant = &ev, ev.MerchantID
		}
		all = append(all, p)
		if !seen[p.merchant] {
			seen[p.merchant] = true
			merchants = append(merchants, p.merchant)
		}
	}
	if len(all) == 0 {
		return nil
	}
	hooks, err := storage.MerchantWebhooks(ctx, d.db, merchants)
	if err != nil {
		return err
	}
	if len(hooks) == 0 {
		return nil
	}
	hooked := map[string]bool{}
	for _, w := range hooks {
		hooked[w.MerchantID] = true
	}
	evs := make([]event, 0, len(all))
	for _, p := range all {
		if !hooked[p.merchant] {
			continue
		}
		if p.ev == nil {
			var ev topics.Event
			if err := json.Unmarshal(p.rec.Value, &ev); err != nil || ev.ID == "" {
				d.log.Error("undecodable event skipped", "topic", d.cfg.Namespace.Logical(p.rec.Topic), "offset", p.rec.Offset)
				continue
			}
			p.ev = &ev
		}
		evs = append(evs, event{*p.ev, p.rec})
	}
	rows := d.deliveryRows(evs, hooks)
	if len(rows) == 0 {
		return nil
	}
	// Queues this batch creates are leased to this dispatcher and their deliveries
	// go straight to the workers, without waiting for a claim, as far as the
	// pipeline has room.
	queues := map[storage.QueueKey]bool{}
	for _, r := range rows {
		queues[storage.QueueKey{WebhookID: r.WebhookID, Topic: r.Topic, Partition: r.Partition, AggKey: r.AggKey}] = true
	}
	retry := *token != 0
	if !retry {
		t, err := storage.NewLeaseToken(ctx, d.db)
		if err != nil {
			return err
		}
		*token = t
	}
	room := d.reserve(len(queues))
	start := time.Now() // the leases of the queues made here run from after it (claim.at)
	ins, err := storage.InsertDeliveriesAs(ctx, d.db, rows, room, d.cfg.Lease, *token)
	if err != nil {
		d.unreserve(room)
		return err
	}
	if retry {
		d.wake() // queues an unanswered try leased are due now: claim them
	}
	d.unreserve(room - len(ins.Leased))
	d.handOff(ins, hooks, start)
	return nil
}

// deliveryRows are the deliveries of evs: one per event and webhook of its
// merchant that subscribes to its topic.
func (d *Dispatcher) deliveryRows(evs []event, hooks []storage.Webhook) []storage.NewDelivery {
	byMerchant := map[string][]storage.Webhook{}
	for _, w := range hooks {
		byMerchant[w.MerchantID] = append(byMerchant[w.MerchantID], w)
	}
	var rows []storage.NewDelivery
	for _, e := range evs {
		key := e.ev.Key
		if key == "" {
			key = string(e.rec.Key)
		}
		for _, w := range byMerchant[e.ev.MerchantID] {
			if !w.Subscribes(e.ev.Type) {
				continue
			}
			echo := "" // the spec's {topic, data}; the challenge only for webhooks that opt in
			if w.IncludeChallenge {
				echo = w.Challenge
			}
			body, err := webhooks.Body(e.ev.Type, e.ev.Payload, echo)
			if err != nil {
				d.log.Error("event payload cannot be sent; skipped", "event_id", e.ev.ID, "err", err)
				continue
			}
			rows = append(rows, storage.NewDelivery{EventID: e.ev.ID, WebhookID: w.WebhookID, MerchantID: e.ev.MerchantID,
				Topic: e.ev.Type, AggKey: key, Partition: e.rec.Partition, Offset: e.rec.Offset, Body: body,
				TraceParent: tracing.HeaderValue(e.rec)})
		}
	}
	return rows
}

// handOff sends the queues a recording leased to it (with their new
// deliveries, oldest first) straight to the workers, and wakes the claimer for
// deliveries that went into queues it did not hand over.
func (d *Dispatcher) handOff(ins storage.Inserted, hooks []storage.Webhook, start time.Time) {
	chains := map[storage.QueueKey][]storage.Delivery{}
	if len(ins.Leased) > 0 {
		hooksByID := map[string]storage.Webhook{}
		for _, w := range hooks {
			hooksByID[w.WebhookID] = w
		}
		now := time.Now()
		for _, n := range ins.New {
			k := storage.QueueKey{WebhookID: n.WebhookID, Topic: n.Topic, Partition: n.Partition, AggKey: n.AggKey}
			w := hooksByID[n.WebhookID]
			chains[k] = append(chains[k], storage.Delivery{EventID: n.EventID, WebhookID: n.WebhookID, MerchantID: n.MerchantID,
				Topic: n.Topic, Body: n.Body, Status: "PENDING", CreatedAt: now, UpdatedAt: now, Endpoint: w.Endpoint,
				Challenge: w.Challenge, SigningSecret: w.SigningSecret, PreviousSigningSecret: w.PreviousSigningSecret,
				PreviousSecretExpiresAt: w.PreviousSecretExpiresAt, IsActive: w.IsActive, IncludeChallenge: w.IncludeChallenge, AggKey: n.AggKey, Partition: n.Partition, Offset: n.Offset,
				TraceParent: n.TraceParent})
		}
		for _, l := range ins.Leased {
			ds := chains[l.Queue]
			slices.SortFunc(ds, func(a, b storage.Delivery) int { return cmp.Compare(a.Offset, b.Offset) })
			d.send(claim{storage.Claimed{Queue: l.Queue, LeaseID: l.ID, Deliveries: ds}, start})
		}
	}
	// Deliveries that went into queues not handed over here wait for a claim.
	handed := 0
	for _, l := range ins.Leased {
		handed += len(chains[l.Queue])
	}
	if len(ins.New) > handed {
		d.wake()
	}
}

// header returns the value of a record header ("" if absent).
func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
