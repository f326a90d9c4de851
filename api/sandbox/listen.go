package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/outbound/webhooks"
	"paysvc/actors/values/ids"
	"paysvc/api/edge"
	"paysvc/storage"
	"paysvc/topics"
	"paysvc/topics/inproc"
)

// The sandbox's webhook developer tools, behind `paysvc listen` and `paysvc trigger`:
// a Server-Sent Events stream of the merchant's events with the exact bodies a
// webhook would get, and sample events that take the real path (outbox, relay,
// event topics, dispatcher, listen streams). Neither exists on a live server.

const (
	// listenPerMerchant and listenTotal bound open streams: each one is a Kafka
	// consumer reading every merchant's events.
	listenPerMerchant = 5
	listenTotal       = 200
	// listenHeartbeat is how often an idle stream gets a comment line, so proxies
	// and the client can tell a quiet stream from a dead one.
	listenHeartbeat = 15 * time.Second
	// listenWriteWait is how long one write of a stream may block on a client that
	// does not read before the stream is given up.
	listenWriteWait = 2 * listenHeartbeat
	// listenBacklog is how far back `since` may reach (a reconnecting client
	// catches up on what it missed while the stream was down).
	listenBacklog = 5 * time.Minute
	// ListenChallengeHeader carries the client's session secret; it becomes the
	// `challenge` of the bodies streamed, as a webhook's challenge does.
	ListenChallengeHeader = "X-Paysvc-Listen-Challenge"
)

// listenHub counts the open listen streams.
type listenHub struct {
	brokers []string
	mu      sync.Mutex
	open    map[string]int
	total   int
}

func newListenHub(brokers []string) *listenHub {
	return &listenHub{brokers: brokers, open: map[string]int{}}
}

func (h *listenHub) acquire(merchant string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.open[merchant] >= listenPerMerchant || h.total >= listenTotal {
		return false
	}
	h.open[merchant]++
	h.total++
	return true
}

func (h *listenHub) release(merchant string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.total--
	if h.open[merchant]--; h.open[merchant] <= 0 {
		delete(h.open, merchant)
	}
}

// listenTopics reads ?events= (comma-separated webhook topics; empty: all five).
func listenTopics(v string) (map[string]string, error) {
	out := map[string]string{}
	for _, t := range strings.Split(v, ",") {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		kt, ok := topics.EventTopics[t]
		if !ok {
			return nil, edge.Invalid("events", "events must be a comma-separated list of "+strings.Join(webhooks.Topics, ", ")+".")
		}
		out[t] = kt
	}
	if len(out) == 0 {
		return topics.EventTopics, nil
	}
	return out, nil
}

// ListenEvents streams the merchant's events from the moment of connection (or from
// ?since=, Unix milliseconds, at most listenBacklog ago) as Server-Sent Events:
// `id` the event id, `event` its topic, `data` the exact body a webhook delivery of
// it carries, with the X-Paysvc-Listen-Challenge header as its challenge. Records
// come from a consumer without a group, so streams do not disturb each other or the
// dispatcher; another merchant's records are never sent.
func (s *Tools) ListenEvents(c echo.Context) error {
	p := edge.PrincipalOf(c)
	want, err := listenTopics(c.QueryParam("events"))
	if err != nil {
		return err
	}
	now := time.Now()
	from := now
	if v := c.QueryParam("since"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return edge.Invalid("since", "since must be a Unix time in milliseconds.")
		}
		from = time.UnixMilli(ms)
		if oldest := now.Add(-listenBacklog); from.Before(oldest) {
			from = oldest
		}
		if from.After(now) {
			from = now
		}
	}
	challenge := c.Request().Header.Get(ListenChallengeHeader)
	if len(challenge) > 200 {
		return edge.Invalid(ListenChallengeHeader, "The challenge must be at most 200 characters.")
	}
	if len(s.listen.brokers) == 0 {
		return &edge.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "unavailable",
			Detail: "Listen streams are not available on this server."}
	}
	if !s.listen.acquire(p.MerchantID) {
		return &edge.Error{Status: http.StatusTooManyRequests, Type: "client_error", Code: "too_many_streams", RetryAfter: 5,
			Detail: fmt.Sprintf("At most %d listen streams may be open at once; close one first.", listenPerMerchant)}
	}
	defer s.listen.release(p.MerchantID)

	kts := make([]string, 0, len(want))
	for _, kt := range want {
		kts = append(kts, kt)
	}
	start, err := s.listenStart(c.Request().Context(), kts, from, c.QueryParam("since") != "")
	if err != nil {
		s.log.Warn("listen: list offsets", "request_id", edge.RequestID(c), "err", err)
		return edge.Unavailable()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.listen.brokers...), kgo.Dialer(inproc.Dial), kgo.ConsumePartitions(start), kgo.ClientID("paysvc-listen"))
	if err != nil {
		return err
	}
	defer cl.Close()

	w := c.Response()
	// A stream is long-lived on purpose: it is exempt from the listener's bounds
	// (api/deadline, the server's WriteTimeout), which would cut it after the
	// write bound. Each write gets its own deadline instead, so a client that
	// stops reading still frees the stream.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Now().Add(listenWriteWait))
	w.Header().Set(echo.HeaderContentType, "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := io.WriteString(w, ": listening\n\n"); err != nil {
		return nil
	}
	w.Flush()
	ctx := c.Request().Context()
	last := time.Now()
	for ctx.Err() == nil {
		if s.ready != nil && !s.ready() {
			return nil // shutting down: the client reconnects to another instance
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fetches := cl.PollFetches(pctx)
		cancel()
		_ = rc.SetWriteDeadline(time.Now().Add(listenWriteWait))
		var werr error
		fetches.EachRecord(func(r *kgo.Record) {
			if werr != nil {
				return
			}
			if msg, ok := sseMessage(r, p.MerchantID, want, challenge); ok {
				_, werr = w.Write(msg)
				last = time.Now()
			}
		})
		if werr == nil && time.Since(last) >= listenHeartbeat {
			_, werr = io.WriteString(w, ": heartbeat\n\n")
			last = time.Now()
		}
		if werr != nil {
			return nil // the client went away
		}
		w.Flush()
	}
	return nil
}

// listenStart is where a stream starts in each partition, fixed before the stream
// is answered (topics.EndOffsets), so every event committed after the client sees it
// open is sent. With since, the first offsets at or after it are listed next and the
// smaller of the two taken: a by-time lookup that finds nothing answers with an end
// listed by its own later request, which may already be past a new event; the end
// listed first cannot be. topicNames are logical; the offsets are keyed by the
// cluster's names (the server's namespace), as the stream's client consumes them.
func (s *Tools) listenStart(ctx context.Context, topicNames []string, since time.Time, bySince bool) (map[string]map[int32]kgo.Offset, error) {
	start, err := topics.EndOffsets(ctx, s.kafka, s.ns, topicNames...)
	if err != nil || !bySince {
		return start, err
	}
	after, err := kadm.NewClient(s.kafka).ListOffsetsAfterMilli(ctx, since.UnixMilli(), s.ns.Topics(topicNames...)...)
	if err == nil {
		err = after.Error()
	}
	if err != nil {
		return nil, err
	}
	after.Each(func(a kadm.ListedOffset) {
		if end, ok := start[a.Topic][a.Partition]; ok && a.Offset >= 0 && a.Offset < end.EpochOffset().Offset {
			start[a.Topic][a.Partition] = kgo.NewOffset().At(a.Offset)
		}
	})
	return start, nil
}

// sseMessage is the stream's message for an event record, if it is the merchant's.
func sseMessage(r *kgo.Record, merchant string, want map[string]string, challenge string) ([]byte, bool) {
	for _, h := range r.Headers {
		if h.Key == "merchant_id" && string(h.Value) != merchant {
			return nil, false // cheap refusal before decoding; the envelope decides below
		}
	}
	var ev topics.Event
	if err := json.Unmarshal(r.Value, &ev); err != nil || ev.ID == "" || ev.MerchantID != merchant {
		return nil, false
	}
	if _, ok := want[ev.Type]; !ok {
		return nil, false
	}
	body, err := webhooks.Body(ev.Type, ev.Payload, challenge)
	if err != nil {
		return nil, false
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "id: %s\nevent: %s\n", sseField(ev.ID), sseField(ev.Type))
	for _, line := range bytes.Split(body, []byte("\n")) { // a reader joins data lines with \n
		b.WriteString("data: ")
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	return b.Bytes(), true
}

func sseField(v string) string { return strings.NewReplacer("\r", "", "\n", "").Replace(v) }

// TriggerEvent queues a sample event of a topic for the merchant, body {"topic"}.
// It goes through the outbox like a real event, so subscribed webhooks and listen
// streams get it; ids start with evt_sample_ (event) and sample_ (data).
func (s *Tools) TriggerEvent(c echo.Context) error {
	b, err := edge.ReadBody(c)
	if err != nil {
		return err
	}
	topic, err := b.Str("topic", true, 50, nil)
	if err != nil {
		return err
	}
	kt, ok := topics.EventTopics[topic]
	if !ok {
		return edge.Invalid("topic", "topic must be one of "+strings.Join(webhooks.Topics, ", ")+".")
	}
	p := edge.PrincipalOf(c)
	now := time.Now().UTC().Truncate(time.Microsecond)
	dataID := "sample_" + ids.Alias(12)
	payload, err := json.Marshal(samplePayload(topic, dataID, now))
	if err != nil {
		return err
	}
	ev := topics.Event{ID: "evt_sample_" + ids.Alias(16), Type: topic, Version: 1, OccurredAt: now, MerchantID: p.MerchantID,
		Key: dataID, Payload: payload}
	body, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if err := storage.InsertOutbox(c.Request().Context(), s.db, []storage.OutboxEvent{{EventID: ev.ID, Topic: kt, Key: dataID,
		MerchantID: p.MerchantID, Body: body}}); err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]string{"event_id": ev.ID, "topic": topic})
}

// samplePayload is a plausible `data` of a topic with the fields the interface's
// Events table shows, in the shape of the real events (their types where the
// sandbox may import them), so a sample validates against docs/events as a real
// one does.
func samplePayload(topic, id string, now time.Time) any {
	ref, phone := "SAMPLE"+ids.Alias(4), "254712345678"
	switch topic {
	case topics.CollectionEvent:
		return topics.Collection{ID: id, InvoiceID: id, State: "COMPLETE", Provider: "MPESA", Value: "100.00", Charges: "1.50",
			NetAmount: "98.50", Currency: "KES", Account: &phone, APIRef: "sample-trigger", MpesaReference: &ref,
			CreatedAt: now, UpdatedAt: now}
	case topics.SendMoneyEvent:
		batch := "sample-batch"
		return topics.SendMoney{ID: id, FileID: id, TrackingID: ids.UUID(), State: "PREVIEW-AND-APPROVE", Status: "PREVIEW-AND-APPROVE", StatusCode: "BP103",
			Provider: "MPESA-B2C", Currency: "KES", TotalAmount: "1000.00", ChargeEstimate: "20.00", PaidAmount: "0.00",
			FailedAmount: "0.00", ActualCharges: "0.00", TransactionsCount: 2, BatchReference: &batch, CreatedAt: now, UpdatedAt: now}
	case topics.ReversalEvent:
		// A refund's id is a number (the spec's chargeback id), so the sample's is
		// one too: a consumer parsing the real events parses this one.
		// (refund.Reversal's shape; the sandbox tools may not import an aggregate.)
		return map[string]any{"id": now.UnixMicro() % 1_000_000_000, "amount": "100.00", "currency": "KES", "status": "PENDING",
			"reason": "Duplicate payment", "original_invoice_id": "sample_invoice", "created_at": now, "updated_at": now}
	case topics.SubscriptionEvent:
		next := now.AddDate(0, 1, 0).Format(time.DateOnly)
		return topics.Subscription{ID: id, Status: "ACTIVE",
			Plan: topics.SubscriptionEventPlan{PlanID: "sample_plan", Name: "SamplePlan", Amount: "500.00", Currency: "KES",
				Frequency: 1, FrequencyUnit: "M"},
			Customer: topics.SubscriptionEventCustomer{CustomerID: "sample_customer", Email: "sample.customer@example.com",
				FirstName: "Sample", LastName: "Customer"},
			CompletedCycles: 1, NextDate: &next, CreatedAt: now, UpdatedAt: now}
	default: // wallet_transfer_event
		return topics.WalletTransfer{ID: id, FromCurrency: "KES", ToCurrency: "KES", AmountSent: "100.00", AmountReceived: "100.00",
			ExchangeRate: "1.00", Status: "COMPLETE", OriginWallet: "sample_wallet_from", DestinationWallet: "sample_wallet_to",
			Narrative: "Sample transfer", CreatedAt: now}
	}
}
