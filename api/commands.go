package api

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"paysvc/actors/values/ids"
	"paysvc/api/edge"
	"paysvc/storage"
	"paysvc/topics"
	"paysvc/topics/tracing"
)

// issue produces a command and waits for the engine's reply, which arrives only
// after the batch holding the command committed. If the reply does not come in
// time, the stored reply is looked up before giving up with 504 (the command may
// still apply; a retry with the same Idempotency-Key cannot apply it twice).
func (s *Server) issue(c echo.Context, typ string, payload any) (topics.Reply, error) {
	p := edge.PrincipalOf(c)
	select {
	case s.inflight <- struct{}{}:
		defer func() { <-s.inflight }()
	default:
		return topics.Reply{}, &edge.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "overloaded",
			Detail: "Too many requests in flight; retry shortly.", RetryAfter: 1}
	}
	id, _ := c.Get(ctxCommandID).(string)
	fresh := id == ""
	if fresh {
		// Minted here for this request alone: the engine need not look it up
		// (topics.Command.FreshID). An id from an Idempotency-Key can come again.
		id = ids.UUID()
	}
	// The server's environment: the engine refuses the command unless it is the
	// merchant's (actors/engine/guard.go).
	cmd := topics.Command{ID: id, Type: typ, Version: 1, MerchantID: p.MerchantID, ReplyTo: s.hub.Instance(),
		IssuedAt: time.Now().UTC(), FreshID: fresh, Environment: s.cfg.Environment}
	// The payload is encoded once, inside the envelope (docs/benchmarks-history.md).
	value, err := topics.EncodeCommandValue(cmd, payload)
	if err != nil {
		return topics.Reply{}, err
	}
	ch, cancel := s.hub.Register(id)
	defer cancel()
	commandsWaiting.Inc()
	defer commandsWaiting.Dec()
	ctx := c.Request().Context()
	// Only a failed produce wakes this handler: a produced command's next news is
	// its reply. Waking it for every acknowledgement as well cost each request a
	// trip through the scheduler, where under load it queued behind the other
	// handlers for nothing (docs/benchmarks-history.md).
	failed := make(chan error, 1)
	rec := &kgo.Record{Topic: s.ns.Topic(topics.CommandsTopic), Key: topics.CommandKey(p.MerchantID), Value: value}
	var span trace.Span // nil when tracing is off: nothing traced, nothing allocated
	if tracing.On() {
		var pctx context.Context
		pctx, span = tracing.Tracer().Start(ctx, "produce "+topics.CommandsTopic, trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(attribute.String("messaging.system", "kafka"), attribute.String("messaging.destination.name", topics.CommandsTopic),
				attribute.String("paysvc.command.id", id), attribute.String("paysvc.command.type", typ)))
		// The engine continues the trace from the record (actors/engine applyBatch).
		if h, ok := tracing.RecordHeader(pctx); ok {
			rec.Headers = append(rec.Headers, h)
		}
	}
	s.kafka.Produce(ctx, rec,
		func(_ *kgo.Record, err error) {
			if span != nil {
				if err != nil {
					span.SetStatus(codes.Error, err.Error())
				}
				span.End()
			}
			if err != nil {
				commandProduced(typ, "error").Inc()
				failed <- err
				return
			}
			commandProduced(typ, "ok").Inc()
		})
	timer := time.NewTimer(s.cfg.ReplyTimeout)
	defer timer.Stop()
	select {
	case r := <-ch:
		return r, nil
	case err := <-failed:
		s.log.ErrorContext(ctx, "produce command", "request_id", edge.RequestID(c), "type", typ, "err", err)
		return topics.Reply{}, edge.Unavailable()
	case <-timer.C:
		replyTimeouts.Inc()
		dctx, span := tracing.DBSpan(ctx, "SELECT")
		if span != nil {
			span.SetAttributes(tracing.CommandAttr(id))
		}
		storedType, stored, ok, err := storage.ProcessedCommand(dctx, s.db, p.MerchantID, id)
		tracing.EndDB(span, err)
		if err == nil && ok {
			if storedType != typ {
				// The id was applied as another operation: its reply is not this one's.
				return topics.Reply{}, errKeyReused
			}
			if r, err := topics.DecodeReply(stored); err == nil {
				return r, nil
			}
		}
		return topics.Reply{}, &edge.Error{Status: http.StatusGatewayTimeout, Type: "server_error", Code: "timeout",
			Detail: "The request was accepted but its outcome is not known yet; retry with the same Idempotency-Key."}
	case <-ctx.Done():
		return topics.Reply{}, &edge.Error{Status: 499, Type: "client_error", Code: "client_closed", Detail: "Client closed the request."}
	}
}

// replyStatus maps the engine's refusal codes to HTTP.
var replyStatus = map[string]int{
	"invalid":               http.StatusBadRequest,
	"not_found":             http.StatusNotFound,
	"destination_not_found": http.StatusBadRequest,
	"insufficient_funds":    http.StatusBadRequest,
	"currency_mismatch":     http.StatusBadRequest,
	"same_wallet":           http.StatusBadRequest,
	"label_taken":           http.StatusBadRequest,
	"wallet_not_kes":        http.StatusBadRequest,
	"not_awaiting_approval": http.StatusBadRequest,
	"not_cancellable":       http.StatusBadRequest,
	"cannot_disburse":       http.StatusBadRequest,
	"nonce_mismatch":        http.StatusBadRequest,
	"insufficient_balance":  http.StatusBadRequest,
	"reply_expired":         http.StatusConflict,
	// Set aside by the engine (docs/security.md, "Poison commands in the engine").
	"unprocessable_command": http.StatusUnprocessableEntity,
	"command_failed":        http.StatusInternalServerError,
	"balance_limit":         http.StatusBadRequest,
	// The engine's guard: the merchant was disabled after the request was
	// authenticated (actors/engine/guard.go).
	"merchant_disabled": http.StatusForbidden,
	// refunds (actors/aggregates/refund/refundkind)
	"refund_exceeds_invoice": http.StatusBadRequest,
	"invoice_not_refundable": http.StatusBadRequest,
	// subscriptions (actors/aggregates/subscription/subscriptionkind)
	"subscription_status": http.StatusBadRequest,
}

// replied is the state the engine's reply to an issued command carries: issuing's
// own error (err), the reply's refusal, or its decoded result.
func replied[T any](r topics.Reply, err error) (T, error) {
	var v T
	if err != nil {
		return v, err
	}
	if r.Error != nil {
		return v, refusal(r.Error)
	}
	err = json.Unmarshal(r.Result, &v)
	return v, err
}

// refusal turns a reply error into the API error.
func refusal(re *topics.ReplyError) *edge.Error {
	status, ok := replyStatus[re.Code]
	if !ok {
		return edge.ErrInternal
	}
	typ := "client_error"
	switch {
	case status == http.StatusBadRequest:
		typ = "validation_error"
	case status >= 500:
		typ = "server_error"
	}
	return &edge.Error{Status: status, Type: typ, Code: re.Code, Detail: re.Detail, Attr: re.Attr}
}
