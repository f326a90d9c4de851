// Package scheduler issues the charge of every due subscription cycle. It keeps no
// state of its own: each tick it reads which subscriptions are due (the snapshots
// say so) and produces each cycle's command with its derived id
// (subscription.CycleCommandID). So it is restart-safe (a cycle that fell due
// while the service was down is found on the first tick), and any number of
// instances may run at once: two instances issue the same id for the same cycle,
// and the engine's processed-command dedupe applies it once (the second gets the
// stored reply). The subscription's own state check (slot, date, generation, no
// charge in flight) is the second guard.
package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/subscription"
	"paysvc/storage"
	"paysvc/topics"
)

// Produce sends commands to the commands topic and returns once they are durable.
type Produce func(ctx context.Context, cmds []topics.Command) error

// KafkaProducer produces commands synchronously with a franz-go client.
func KafkaProducer(cl *kgo.Client) Produce {
	return func(ctx context.Context, cmds []topics.Command) error {
		recs := make([]*kgo.Record, 0, len(cmds))
		for _, c := range cmds {
			v, err := topics.EncodeCommand(c)
			if err != nil {
				return err
			}
			recs = append(recs, &kgo.Record{Topic: topics.CommandsTopic, Key: topics.CommandKey(c.MerchantID), Value: v})
		}
		return cl.ProduceSync(ctx, recs...).FirstErr()
	}
}

// Scheduler scans for due cycles and issues them.
type Scheduler struct {
	DB      *sqlx.DB
	Produce Produce
	Now     func() time.Time // the wall clock; tests may fix it
	Page    int              // cycles read and produced at a time (default 5000)
	Log     *slog.Logger
}

// Cycle is the command of one due cycle.
func Cycle(d storage.DueCycle, now time.Time) topics.Command {
	body, _ := json.Marshal(topics.SubscriptionCycle{SubscriptionID: d.SubscriptionID, Slot: d.Slot, Date: d.Date,
		Generation: d.Generation, Today: d.Today})
	return topics.Command{ID: subscription.CycleCommandID(d.SubscriptionID, d.Slot, d.Date, d.Generation),
		Type: topics.CmdSubscriptionCycle, Version: 1, MerchantID: d.MerchantID, IssuedAt: now, Payload: body}
}

// RunOnce issues every cycle due now, on the wall clock and on test clocks, and
// returns how many commands it produced. A cycle issued again by a later tick
// (its charge still in the commands topic) is the same command: a no-op.
func (s *Scheduler) RunOnce(ctx context.Context) (int, error) {
	page := s.Page
	if page <= 0 {
		page = 5000
	}
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	today := subscription.Today(now)
	issued := 0
	for after := ""; ; {
		due, err := storage.DueSubscriptions(ctx, s.DB, today, after, page)
		if err != nil {
			return issued, err
		}
		if len(due) == 0 {
			break
		}
		cmds := make([]topics.Command, len(due))
		for i, d := range due {
			cmds[i] = Cycle(d, now.UTC())
		}
		if err := s.Produce(ctx, cmds); err != nil {
			return issued, fmt.Errorf("scheduler: produce: %w", err)
		}
		issued += len(cmds)
		after = due[len(due)-1].SubscriptionID
		if len(due) < page {
			break
		}
	}
	// Test clocks: one page per tick, oldest date first, so advancing a clock far
	// runs its cycles in order (each next one is due only once the one before
	// has been charged and moved the date on).
	due, err := storage.DueOnTestClocks(ctx, s.DB, page)
	if err != nil {
		return issued, err
	}
	if len(due) > 0 {
		cmds := make([]topics.Command, len(due))
		for i, d := range due {
			cmds[i] = Cycle(d, now.UTC())
		}
		if err := s.Produce(ctx, cmds); err != nil {
			return issued, fmt.Errorf("scheduler: produce: %w", err)
		}
		issued += len(cmds)
	}
	return issued, nil
}

// Run ticks until ctx ends. A failed tick is logged and retried at the next one.
func (s *Scheduler) Run(ctx context.Context, interval time.Duration) error {
	log := s.Log
	if log == nil {
		log = slog.Default()
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if n, err := s.RunOnce(ctx); err != nil && ctx.Err() == nil {
			log.Warn("subscription scheduler tick failed", "err", err)
		} else if n > 0 {
			log.Debug("subscription cycles issued", "count", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
