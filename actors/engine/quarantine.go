package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lib/pq"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/engine/aggregate"
	"paysvc/storage"
	"paysvc/topics"
)

// A batch that fails is retried from the committed offset. That is right for a
// lost connection or a serialization failure, and wrong for a command the database
// will refuse every time (a NUL inside a jsonb snapshot, a balance past
// numeric(20,2)): retrying it forever would stop every merchant of the partition.
// So a failure that retrying cannot fix starts an isolation: the next batches are
// cut in halves until one command alone still fails; that command is committed as
// processed with a refusal as its reply, recorded in command_quarantine, and the
// partition goes on (docs/design.md, "Guarantees, and what gives each"; docs/security.md).

// Reply codes of a quarantined command (api maps them to 422 and 500).
const (
	CodeUnprocessable = "unprocessable_command"
	CodeCommandFailed = "command_failed"
)

// panicError is a handler panic caught in the engine: it fails the batch, and
// isolation finds and quarantines the command that causes it.
type panicError struct{ value any }

func (e panicError) Error() string {
	return fmt.Sprintf("engine: command handler panicked: %v", e.value)
}

// permanent reports whether a failed batch would fail again on retry because of
// what its commands hold. Only data-dependent failures count: SQLSTATE classes 22
// (data exception: bad bytes, overflow), 23 (integrity constraint) and 54 (program
// limit: a value too large), encoding errors and panics. Everything else is
// retried as before: connection loss, serialization failures, fencing, stale
// snapshots, actor timeouts, and also errors such as an undefined table, which a
// half-finished deploy causes for every command alike: quarantining would then
// refuse every command instead of waiting for the fix.
func permanent(err error) bool {
	if err == nil || errors.Is(err, storage.ErrFenced) || errors.Is(err, storage.ErrStaleSnapshot) ||
		errors.Is(err, errActorTimeout) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		switch pqErr.Code.Class() {
		case "22", "23", "54":
			return true
		}
		return false
	}
	var (
		uve *json.UnsupportedValueError
		ute *json.UnsupportedTypeError
		me  *json.MarshalerError
	)
	return isPanic(err) || errors.As(err, &uve) || errors.As(err, &ute) || errors.As(err, &me)
}

// isPanic reports a panic caught in the engine or in an aggregate's actor.
func isPanic(err error) bool {
	var (
		pe panicError
		ap aggregate.PanicError
	)
	return errors.As(err, &pe) || errors.As(err, &ap)
}

// failureCode names a permanent failure for the quarantine table and the metric:
// the SQLSTATE, or what kind of local failure it was.
func failureCode(err error) string {
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		return string(pqErr.Code)
	}
	if isPanic(err) {
		return "panic"
	}
	return "encode"
}

// failureText is what the quarantine keeps of the error: the driver's message and
// SQLSTATE, never its Detail (which can quote a row's values).
func failureText(err error) string {
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		return fmt.Sprintf("%s (SQLSTATE %s)", pqErr.Message, pqErr.Code)
	}
	return err.Error()
}

// quarantineReply is what the client waiting for a quarantined command gets, and
// every replay of it. Data the database cannot store is the client's to fix (422);
// anything else is ours (500), and the command is waiting for an operator.
func quarantineReply(commandID string, err error) topics.Reply {
	var pqErr *pq.Error
	if errors.As(err, &pqErr) && (pqErr.Code.Class() == "22" || pqErr.Code.Class() == "54") {
		return topics.Reply{CommandID: commandID, Error: &topics.ReplyError{Code: CodeUnprocessable,
			Detail: "The request holds data that cannot be stored (invalid characters or a value out of range). Nothing was changed."}}
	}
	return topics.Reply{CommandID: commandID, Error: &topics.ReplyError{Code: CodeCommandFailed,
		Detail: "The request could not be applied and was set aside for review. Nothing was changed."}}
}

// isolating says whether the partition is narrowing down a permanent failure.
func (p *partition) isolating() bool { return p.suspectEnd >= 0 }

// narrow takes note of a permanent failure of count commands starting at first and
// ending (exclusive) at end: with one command, that command is the cause; with
// more, the next batches take at most half as many, and never go past end.
// Called with p.mu held.
func (e *Engine) narrow(p *partition, err error, first, end int64, count int) {
	if count <= 1 {
		p.poison, p.poisonErr = first, err
		e.log.Error("command fails on its own for a reason retrying cannot fix; quarantining it",
			"partition", p.id, "offset", first, "code", failureCode(err), "err", failureText(err))
		return
	}
	p.suspectEnd, p.limit = end, max(1, count/2)
	isolationSteps.Inc()
	e.log.Warn("batch failed for a reason retrying cannot fix; retrying in smaller batches to find the command",
		"partition", p.id, "from", first, "to", end, "commands", count, "next_batch", p.limit, "err", failureText(err))
}

// quarantine commits rec, the command found to fail on its own, as processed with
// a refusal, and answers it. It reports false if the commit did not happen (the
// partition was reset, or dropped when fenced). Called with p.mu held and no
// commit in flight.
func (e *Engine) quarantine(ctx context.Context, p *partition, rec *kgo.Record) bool {
	q := storage.Quarantine{Topic: topics.CommandsTopic, Partition: p.id, Epoch: p.epoch, Offset: rec.Offset,
		ErrorCode: failureCode(p.poisonErr), Error: failureText(p.poisonErr), Record: rec.Value}
	c, decErr := topics.DecodeCommand(rec.Value)
	if decErr != nil {
		// Undecodable records never fail a batch (they are skipped), so this is only
		// a record that changed under us; keep it anyway.
		q.CommandID, q.MerchantID, q.Type = fmt.Sprintf("offset-%d", rec.Offset), "unknown", "unknown"
	} else {
		q.CommandID, q.MerchantID, q.Type = c.ID, c.MerchantID, c.Type
	}
	reply := quarantineReply(q.CommandID, p.poisonErr)
	enc, err := topics.EncodeReply(reply)
	if err == nil {
		q.Reply = enc
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		var stored []byte
		stored, err = storage.QuarantineCommand(cctx, e.db, q)
		cancel()
		if err == nil && string(stored) != string(enc) {
			reply, err = topics.DecodeReply(stored)
		}
	}
	if err != nil {
		// The poison stays marked: the next attempt quarantines it again.
		e.failed(ctx, p, err, rec.Offset, rec.Offset+1, 0)
		return false
	}
	commandsQuarantined.WithLabelValues(q.Type, q.ErrorCode).Inc()
	commandsApplied.WithLabelValues(q.Type, "quarantined").Inc()
	e.log.Error("command quarantined: answered with a refusal, the partition goes on",
		"partition", p.id, "offset", rec.Offset, "command_id", q.CommandID, "type", q.Type, "code", q.ErrorCode)
	p.poison, p.poisonErr = -1, nil
	p.committed, p.next = rec.Offset+1, rec.Offset+1
	p.failures = 0
	if decErr == nil {
		e.deliver([]outgoing{{replyTo: c.ReplyTo, reply: reply}})
	}
	return true
}
