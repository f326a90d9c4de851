package dispatch

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"paysvc/actors/outbound/webhooks"
	"paysvc/actors/outbound/webhooks/outbound"
	"paysvc/storage"
)

// The delivery pipeline: Workers goroutines each send one leased queue's deliveries
// in order, and a finisher writes the outcomes of many queues in one transaction,
// in which a queue whose deliveries all went through keeps its lease and takes its
// next deliveries (or is deleted when it has none). Queues come in from the ingest
// (queues it creates are leased to it) and from claims of due queues: retries, and
// queues created while the pipeline was full, or leased by a dispatcher that died.

// claim is a leased queue on its way through the pipeline. at is taken before the
// statement that leased it was sent, so the lease the database gave (from its own
// now(), later) runs at least until at + Lease: every bound measured from at is
// inside the lease however slow that statement was.
type claim struct {
	storage.Claimed
	at time.Time
}

// queueDone is what became of a claim: one outcome per delivery taken (attempted,
// or released untouched), and when the queue is due again unless it goes on.
type queueDone struct {
	queue    storage.QueueKey
	lease    int64
	outcomes []storage.Outcome
	sent     []storage.Delivery // the deliveries of outcomes, same order
	next     time.Time
	goOn     bool // every delivery taken reached an end: keep the lease, take the next ones
}

// maxFinishBatch bounds the outcomes written in one transaction.
const maxFinishBatch = 1000

// finishers write batches concurrently: a batch's transaction is a few round trips,
// and on a busy database queues would otherwise wait for the one before.
const finisherCount = 2

func (d *Dispatcher) deliverLoop(ctx context.Context) {
	done := make(chan queueDone, d.capacity())
	var workers sync.WaitGroup
	for range d.cfg.Workers {
		workers.Go(func() {
			for c := range d.work {
				done <- d.sendQueue(ctx, c)
			}
		})
	}
	var finishers sync.WaitGroup
	for range finisherCount {
		finishers.Go(func() { d.finishLoop(ctx, done) })
	}
	var marker sync.WaitGroup
	marker.Go(func() { d.markLoop(ctx) })

	t := time.NewTicker(d.cfg.Poll)
	defer t.Stop()
	for ctx.Err() == nil {
		// A claim takes up to half the pipeline (the ingest hands over the queues it
		// creates in the other half), and waits until it can take a quarter, so one
		// claim takes many queues.
		free := d.reserve(d.capacity() / 2)
		d.starved.Store(free <= d.capacity()/4)
		if free > d.capacity()/4 {
			start := time.Now()
			claimed, err := storage.ClaimQueues(ctx, d.db, d.cfg.Lease, free, d.cfg.PerQueue)
			if err != nil && ctx.Err() == nil {
				d.log.Warn("claim delivery queues", "err", err)
			}
			d.unreserve(free - len(claimed))
			for _, c := range claimed {
				d.send(claim{c, start})
			}
			if len(claimed) == free {
				continue // there may be more due now
			}
		} else {
			d.unreserve(free)
		}
		select {
		case <-ctx.Done():
		case <-d.wakeCh:
		case <-t.C:
		}
	}
	<-d.ingestEnded // it may still hand queues over
	d.workMu.Lock()
	d.workClosed = true
	close(d.work)
	d.workMu.Unlock()
	workers.Wait()
	close(d.marks)
	marker.Wait()
	close(done)
	finishers.Wait()
}

// markReq asks markLoop to record one delivery as PROCESSING before its first attempt.
type markReq struct {
	key  [2]string // event id, webhook id
	done chan error
}

// maxMarkBatch bounds the deliveries marked in one statement.
const maxMarkBatch = 1000

// markLoop writes PROCESSING for the deliveries workers are about to attempt for the
// first time: whatever has been asked meanwhile, in one statement, so the step the
// spec's order needs costs one round trip per batch, not one per delivery. Each
// worker waits for its mark to commit before it sends, so a record reads PROCESSING
// while its request is out.
func (d *Dispatcher) markLoop(ctx context.Context) {
	for first := range d.marks {
		batch := []markReq{first}
	more:
		for len(batch) < maxMarkBatch {
			select {
			case m, ok := <-d.marks:
				if !ok {
					break more
				}
				batch = append(batch, m)
			default:
				break more
			}
		}
		keys := make([][2]string, len(batch))
		for i, m := range batch {
			keys[i] = m.key
		}
		err := storage.MarkProcessing(ctx, d.db, keys)
		for _, m := range batch {
			m.done <- err
		}
	}
}

// markProcessing records dl as PROCESSING and waits until that is committed.
func (d *Dispatcher) markProcessing(ctx context.Context, dl storage.Delivery) error {
	done := make(chan error, 1)
	d.marks <- markReq{key: [2]string{dl.EventID, dl.WebhookID}, done: done}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// send hands a leased queue (with its reserved place) to the workers. Once they
// have stopped, the queue is given back due now instead.
func (d *Dispatcher) send(c claim) {
	d.workMu.Lock()
	if !d.workClosed {
		d.work <- c // never blocks: the channel holds capacity(), the pipeline as many
		d.workMu.Unlock()
		return
	}
	d.workMu.Unlock()
	d.unreserve(1)
	f := storage.Finish{Due: []storage.QueueNext{{Queue: c.Queue, LeaseID: c.LeaseID, Next: time.Now()}}}
	if _, err := storage.FinishDeliveries(context.Background(), d.db, f); err != nil {
		d.log.Warn("give back a delivery queue at shutdown; it is due when its lease ends", "err", err)
	}
}

// sendQueue sends a claimed queue's deliveries oldest first and stops at the first
// one that is to be retried: the rest are released untouched, and the queue is due
// again at that retry. A slow receiver holds one worker for at most the client's
// timeout per delivery. The claim starts no attempt after half its lease, and cuts
// one still out at three quarters (a timeout, retried), so it never sends after
// another dispatcher could have claimed the queue: that one would send the same
// aggregate's events beside it, and a later event could arrive before an earlier
// one is sent again.
func (d *Dispatcher) sendQueue(ctx context.Context, c claim) queueDone {
	res := queueDone{queue: c.Queue, lease: c.LeaseID, next: time.Now(), goOn: true}
	until := c.at.Add(d.cfg.Lease * 3 / 4)
	if !d.enter(c.Queue.WebhookID) {
		// The webhook has its share of workers already (a slow receiver, or a busy
		// one): the queue goes back untouched, due shortly, and this worker serves
		// another merchant meanwhile.
		deferred.Inc()
		res.next = time.Now().Add(webhookBusyBackoff)
		res.release(c.Deliveries, res.next)
		return res
	}
	defer d.leave(c.Queue.WebhookID)
	for i, dl := range c.Deliveries {
		if ctx.Err() != nil || time.Since(c.at) > d.cfg.Lease/2 {
			res.release(c.Deliveries[i:], time.Now())
			break
		}
		o, ok := d.tracedAttempt(ctx, dl, until)
		if !ok { // shutting down: the attempt was cut short and does not count
			res.release(c.Deliveries[i:], time.Now())
			break
		}
		res.outcomes, res.sent = append(res.outcomes, o), append(res.sent, dl)
		if o.Status == statusRetrying {
			res.next = o.Next
			res.release(c.Deliveries[i+1:], o.Next)
			break
		}
	}
	return res
}

// webhookBusyBackoff is how long a queue waits when its webhook has its share of
// workers.
const webhookBusyBackoff = 200 * time.Millisecond

// enter takes one of the webhook's worker slots, if one is free.
func (d *Dispatcher) enter(webhookID string) bool {
	d.busyMu.Lock()
	defer d.busyMu.Unlock()
	if d.busy[webhookID] >= d.cfg.PerWebhook {
		return false
	}
	d.busy[webhookID]++
	return true
}

func (d *Dispatcher) leave(webhookID string) {
	d.busyMu.Lock()
	defer d.busyMu.Unlock()
	if d.busy[webhookID]--; d.busy[webhookID] <= 0 {
		delete(d.busy, webhookID)
	}
}

// release gives deliveries back for the next claim of their queue, due at next, with
// their status as it is (storage.Outcome: not attempted).
func (r *queueDone) release(ds []storage.Delivery, next time.Time) {
	r.goOn = false
	for _, dl := range ds {
		r.outcomes = append(r.outcomes, storage.Outcome{EventID: dl.EventID, WebhookID: dl.WebhookID, Status: dl.Status, Next: next})
		r.sent = append(r.sent, dl)
	}
}

// statusRetrying is a delivery attempted at least once and due again: the spec's
// PROCESSING, between PENDING (not attempted yet) and DELIVERED or FAILED.
const statusRetrying = "PROCESSING"

// attempt makes one attempt and says what follows: DELIVERED, FAILED (attempts
// exhausted, the webhook is disabled, or the body may not be sent), or PROCESSING
// until the retry. ok is false when ctx ended during the attempt (or the PROCESSING
// mark could not be written): it does not count, and the delivery goes back as it is.
// A request still out at until (the end of the time the claim may send in) is cut
// and counts as a timeout.
//
// Every path follows the spec's order PENDING -> PROCESSING -> DELIVERED or FAILED:
// a delivery's first turn marks it PROCESSING before anything else, also when the
// turn ends without a request (a disabled webhook), so no record jumps from PENDING
// to an end, and a record being sent reads PROCESSING while the receiver holds the
// request.
func (d *Dispatcher) attempt(ctx context.Context, dl storage.Delivery, until time.Time) (storage.Outcome, bool) {
	o := storage.Outcome{EventID: dl.EventID, WebhookID: dl.WebhookID, Attempted: true, Next: time.Now()}
	actx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	if dl.Status == "PENDING" {
		if err := d.markProcessing(actx, dl); err != nil {
			if ctx.Err() == nil {
				d.log.WarnContext(ctx, "mark webhook delivery PROCESSING; it is sent later", "event_id", dl.EventID, "err", err)
			}
			return o, false
		}
	}
	if !dl.IsActive {
		msg := "webhook is disabled"
		o.Status, o.Error = "FAILED", &msg
		return o, true
	}
	if webhooks.EchoesWithdrawnChallenge(dl.Body, dl.Challenge, dl.IncludeChallenge) {
		// Never rewritten, and not sent with the live challenge the merchant
		// withdrew from bodies: the merchant changes the challenge and replays.
		msg := webhooks.WithdrawnChallengeError
		o.Status, o.Error = "FAILED", &msg
		return o, true
	}
	headers := webhooks.SignDelivery(dl.Challenge, signingKeys(dl), dl.EventID, time.Now(), dl.Body)
	resp, err := d.client.Post(actx, dl.Endpoint, headers, dl.Body)
	if ctx.Err() != nil {
		return o, false
	}
	// The signature headers as sent are recorded with the attempt for the merchant's
	// console, and never logged (docs/security.md).
	o.Recorded, o.Latency, o.Signed = true, resp.Latency, storage.SignedOf(headers)
	o.HTTPStatus, o.Error = outcome(resp, err)
	if err == nil && resp.Status == 200 {
		attempts.WithLabelValues("delivered").Inc()
		deliverSeconds.Observe(time.Since(dl.CreatedAt).Seconds())
		o.Status = "DELIVERED"
		return o, true
	}
	failures.WithLabelValues(outbound.Reason(resp.Status, err)).Inc()
	if err != nil {
		attempts.WithLabelValues("failed_transport").Inc()
		// The merchant sees outbound.Describe's words; the operator gets the cause.
		d.log.DebugContext(ctx, "webhook delivery failed", "webhook_id", dl.WebhookID, "event_id", dl.EventID, "err", err)
	} else {
		attempts.WithLabelValues("failed_http").Inc()
		msg := fmt.Sprintf("endpoint answered HTTP %d", resp.Status)
		o.Error = &msg
	}
	if dl.Attempts+1 >= d.cfg.MaxAttempts {
		o.Status = "FAILED"
		return o, true
	}
	delay := min(d.cfg.RetryBase<<min(dl.Attempts, 20), d.cfg.RetryMax)
	delay = delay/2 + rand.N(delay/2+1) // full jitter on the upper half
	delay = max(delay, resp.RetryAfter)
	o.Status, o.Next = statusRetrying, time.Now().Add(delay)
	return o, true
}

// finishLoop writes outcomes as they come, batching whatever has arrived meanwhile,
// until done is closed; then it writes the rest.
func (d *Dispatcher) finishLoop(ctx context.Context, done <-chan queueDone) {
	wctx := context.WithoutCancel(ctx)
	for first := range done {
		batch := []queueDone{first}
		n := len(first.outcomes)
	more:
		for n < maxFinishBatch {
			select {
			case q, ok := <-done:
				if !ok {
					break more
				}
				batch = append(batch, q)
				n += len(q.outcomes)
			default:
				break more
			}
		}
		d.finish(ctx, wctx, batch)
	}
}

// finish writes one batch, retrying while the database is unreachable (for a while
// after shutdown began), and sends on the queues that keep their lease. A batch that
// cannot be written is dropped: its queues come due when their leases run out, and
// their deliveries are sent again.
func (d *Dispatcher) finish(ctx, wctx context.Context, batch []queueDone) {
	f := storage.Finish{Lease: d.cfg.Lease, PerQueue: d.cfg.PerQueue}
	type run struct {
		reset bool
		add   int
		last  storage.Delivery
	}
	runs := map[string]*run{}
	var order []string
	goOn := ctx.Err() == nil
	for _, q := range batch {
		f.Outcomes = append(f.Outcomes, q.outcomes...)
		if q.goOn && goOn {
			f.Continue = append(f.Continue, storage.QueueLease{Queue: q.queue, ID: q.lease})
		} else {
			f.Due = append(f.Due, storage.QueueNext{Queue: q.queue, LeaseID: q.lease, Next: q.next})
		}
		for i, o := range q.outcomes {
			if !o.Recorded { // released, or a disabled webhook: not an attempt on the endpoint
				continue
			}
			r := runs[o.WebhookID]
			if r == nil {
				r = &run{}
				runs[o.WebhookID] = r
				order = append(order, o.WebhookID)
			}
			r.last = q.sent[i]
			if o.Status == "DELIVERED" {
				r.reset, r.add = true, 0
			} else {
				r.add++
			}
		}
	}
	for _, id := range order {
		f.Failures = append(f.Failures, storage.FailureCount{WebhookID: id, Reset: runs[id].reset, Add: runs[id].add})
	}
	var res storage.Finished
	var err error
	var start time.Time // the kept queues' new leases run from after it
	deadline := time.Now().Add(10 * time.Second)
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		start = time.Now()
		if res, err = storage.FinishDeliveries(wctx, d.db, f); err == nil {
			break
		}
		if ctx.Err() != nil && time.Now().After(deadline) {
			d.log.Error("finish deliveries: giving up; the queues come due when their leases end", "queues", len(batch), "err", err)
			d.unreserve(len(batch))
			return
		}
		d.log.Warn("finish deliveries", "queues", len(batch), "err", err)
		time.Sleep(wait)
	}
	if res.Lost > 0 {
		leasesLost.Add(float64(res.Lost))
		d.log.Warn("delivery queue leases ran out before their outcomes were written; their new holders send the rest",
			"queues", res.Lost, "lease", d.cfg.Lease)
	}
	// A queue that goes on keeps its place in the pipeline.
	now := time.Now()
	for _, c := range res.Next {
		d.send(claim{c, start})
	}
	d.unreserve(len(batch) - len(res.Next))
	// The claimer needs to look again only if it went without room, or a queue is
	// due now (a claim that stopped at half its lease).
	if d.starved.Load() || slices.ContainsFunc(f.Due, func(q storage.QueueNext) bool { return !q.Next.After(now) }) {
		d.wake()
	}

	half := d.cfg.Threshold / 2
	for _, id := range order {
		r := runs[id]
		count, ok := res.Failures[id]
		if !ok || r.add == 0 {
			continue
		}
		before := count - r.add
		if r.reset {
			before = 0
		}
		if d.mailer != nil && half > 0 && before < half && count >= half {
			go func(dl storage.Delivery, n int) {
				if err := d.warn(wctx, dl, n); err != nil {
					d.log.Warn("webhook warning email", "webhook_id", dl.WebhookID, "err", err)
				}
			}(r.last, half)
		}
		if count >= d.cfg.Threshold {
			if err := storage.DisableWebhook(wctx, d.db, id); err != nil {
				d.log.Warn("disable webhook", "webhook_id", id, "err", err)
			} else if before < d.cfg.Threshold {
				disabled.Inc()
				d.log.Warn("webhook disabled after consecutive failures", "webhook_id", id, "failures", count)
			}
		}
	}
}

// signingKeys are the keys a delivery is signed with: the webhook's current one and,
// within its rotation window, the one the rotation retired. Which of them sign is
// decided at each attempt (webhooks.SigningKeys.At), so a retry after the window
// carries the current signature alone.
func signingKeys(dl storage.Delivery) webhooks.SigningKeys {
	k := webhooks.SigningKeys{Current: dl.SigningSecret}
	if dl.PreviousSecretExpiresAt != nil {
		k.Previous, k.PreviousUntil = dl.PreviousSigningSecret, *dl.PreviousSecretExpiresAt
	}
	return k
}
