// Package scheduler issues the charge of every due subscription cycle. It keeps no
// state of its own: each tick it reads which subscriptions are due (the snapshots
// say so) and produces each cycle's command with its derived id
// (subscription.CycleCommandID). So it is restart-safe (a cycle that fell due
// while the service was down is found on the first tick), and any number of
// instances may run at once: two instances issue the same id for the same cycle,
// and the engine's processed-command dedupe applies it once (the second gets the
// stored reply). The subscription's own state check (slot, date, generation, no
// charge in flight, no date charged twice) is the second guard.
//
// It acts only on its own environment's enabled merchants, and only in the
// sandbox: a cycle's outcome is the stored test card's (Simulated), and a live
// server has no card acquirer yet, so a live scheduler issues nothing. It reads
// each merchant's due cycles apart, a page each in turn, so no merchant's backlog
// delays another's cycles.
package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/aggregates/subscription"
	"paysvc/actors/values/every"
	"paysvc/storage"
	"paysvc/topics"
)

// Produce sends commands to the commands topic and returns once they are durable.
type Produce func(ctx context.Context, cmds []topics.Command) error

// KafkaProducer produces commands synchronously with a franz-go client, to the
// command topic of namespace ns.
func KafkaProducer(cl *kgo.Client, ns topics.Namespace) Produce {
	topic := ns.Topic(topics.CommandsTopic)
	return func(ctx context.Context, cmds []topics.Command) error {
		recs := make([]*kgo.Record, 0, len(cmds))
		for _, c := range cmds {
			v, err := topics.EncodeCommand(c)
			if err != nil {
				return err
			}
			recs = append(recs, &kgo.Record{Topic: topic, Key: topics.CommandKey(c.MerchantID), Value: v})
		}
		return cl.ProduceSync(ctx, recs...).FirstErr()
	}
}

// ErrEnvironment: the scheduler does not know its environment, so it charges
// nothing (fail closed).
var ErrEnvironment = errors.New("scheduler: Environment must be sandbox or live")

// Scheduler scans for due cycles and issues them.
type Scheduler struct {
	// Environment is the process's (topics.Sandbox or topics.Live): the scheduler
	// reads only that environment's merchants and stamps its commands with it.
	// Live issues nothing (no live card acquirer); anything else is ErrEnvironment.
	Environment string
	DB          *sqlx.DB
	Produce     Produce
	Now         func() time.Time // the wall clock; tests may fix it
	Page        int              // cycles read and produced at a time, per merchant (default 5000)
	Log         *slog.Logger
	// ReissueAfter: a cycle this instance issued is not issued again before this
	// long (default 2 minutes), so a large run still in the command log is not
	// queued again at every tick. Only an optimisation: a repeated cycle is the
	// same command, applied once; a restart forgets and re-issues (harmless).
	ReissueAfter time.Duration

	mu     sync.Mutex
	issued map[string]time.Time
}

// reissueAfter is ReissueAfter, or its default.
func (s *Scheduler) reissueAfter() time.Duration {
	if s.ReissueAfter > 0 {
		return s.ReissueAfter
	}
	return 2 * time.Minute
}

// fresh keeps the commands not issued within ReissueAfter and notes them issued.
func (s *Scheduler) fresh(cmds []topics.Command, now time.Time) []topics.Command {
	after := s.reissueAfter()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.issued == nil {
		s.issued = map[string]time.Time{}
	}
	out := cmds[:0:0]
	for _, c := range cmds {
		if at, ok := s.issued[c.ID]; ok && now.Sub(at) < after {
			continue
		}
		s.issued[c.ID] = now
		out = append(out, c)
	}
	return out
}

// forget drops issued ids older than ReissueAfter, and those of a failed produce.
func (s *Scheduler) forget(now time.Time, failed []topics.Command) {
	after := s.reissueAfter()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range failed {
		delete(s.issued, c.ID)
	}
	for id, at := range s.issued {
		if now.Sub(at) >= after {
			delete(s.issued, id)
		}
	}
}

// produce sends the cycles not issued recently.
func (s *Scheduler) produce(ctx context.Context, due []storage.DueCycle, now time.Time) (int, error) {
	cmds := make([]topics.Command, len(due))
	for i, d := range due {
		cmds[i] = s.Cycle(d, now.UTC())
	}
	cmds = s.fresh(cmds, time.Now())
	if len(cmds) == 0 {
		return 0, nil
	}
	if err := s.Produce(ctx, cmds); err != nil {
		s.forget(time.Now(), cmds)
		return 0, fmt.Errorf("scheduler: produce: %w", err)
	}
	return len(cmds), nil
}

// Cycle is the command of one due cycle, carrying the plan's terms as they are
// now (a change of the plan's amount or currency applies from the next cycle
// issued); the subscription kind prices it from them when it applies it. Its id
// depends only on the cycle, so a second scheduler, or this one after a restart,
// issues the same command, and the engine applies it once. It
// names the scheduler's environment and is Simulated: its outcome is the sandbox
// test card's, not an acquirer's.
func (s *Scheduler) Cycle(d storage.DueCycle, now time.Time) topics.Command {
	p := topics.SubscriptionCycle{SubscriptionID: d.SubscriptionID, Slot: d.Slot, Date: d.Date,
		Generation: d.Generation, Today: d.Today, Terms: topics.SubscriptionTerms{Name: d.PlanName.String,
			Amount: d.PlanAmount.String, Currency: d.PlanCurrency.String}}
	body, _ := json.Marshal(p)
	return topics.Command{ID: subscription.CycleCommandID(d.SubscriptionID, d.Slot, d.Date, d.Generation),
		Type: topics.CmdSubscriptionCycle, Version: 1, MerchantID: d.MerchantID, IssuedAt: now, Payload: body,
		Environment: s.Environment, Simulated: true}
}

// RunOnce issues every cycle due now, on the wall clock and on test clocks, and
// returns how many commands it produced. A cycle issued again by a later tick
// (its charge still in the commands topic) is the same command: a no-op.
func (s *Scheduler) RunOnce(ctx context.Context) (int, error) {
	issued, _, err := s.runOnce(ctx)
	return issued, err
}

// charges reports whether this scheduler issues cycles: only a sandbox one does.
func (s *Scheduler) charges() (bool, error) {
	switch s.Environment {
	case topics.Sandbox:
		return true, nil
	case topics.Live:
		return false, nil
	}
	return false, ErrEnvironment
}

// runOnce is RunOnce that also says how many test-clock cycles were due (issued
// now, or issued before and not yet charged).
func (s *Scheduler) runOnce(ctx context.Context) (issued, clocksDue int, err error) {
	if ok, err := s.charges(); !ok {
		return 0, 0, err
	}
	page := s.Page
	if page <= 0 {
		page = 5000
	}
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	today := subscription.Today(now)
	// The wall clock: every due cycle, a page of each merchant in turn, so one
	// merchant's million cycles do not hold back another's one.
	merchants, err := storage.MerchantsDue(ctx, s.DB, s.Environment, today)
	if err != nil {
		return 0, 0, err
	}
	after := make(map[string]string, len(merchants))
	for len(merchants) > 0 {
		more := merchants[:0]
		for _, m := range merchants {
			due, err := storage.DueSubscriptions(ctx, s.DB, storage.DueQuery{Environment: s.Environment, MerchantID: m, Today: today,
				After: after[m], Limit: page})
			if err != nil {
				return issued, 0, err
			}
			n, err := s.produce(ctx, due, now)
			issued += n
			if err != nil {
				return issued, 0, err
			}
			if len(due) == page {
				after[m] = due[len(due)-1].SubscriptionID
				more = append(more, m)
			}
		}
		merchants = more
	}
	// Test clocks: one page of each merchant per tick, oldest date first, so
	// advancing a clock far runs its cycles in order (each next one is due only
	// once the one before has been charged and moved the date on), and a merchant
	// with a far-advanced clock takes one page of the tick, not all of it.
	merchants, err = storage.MerchantsDueOnTestClocks(ctx, s.DB, s.Environment)
	if err != nil {
		return issued, 0, err
	}
	for _, m := range merchants {
		due, err := storage.DueOnTestClocks(ctx, s.DB, storage.DueQuery{Environment: s.Environment, MerchantID: m, Limit: page})
		if err != nil {
			return issued, clocksDue, err
		}
		clocksDue += len(due)
		n, err := s.produce(ctx, due, now)
		issued += n
		if err != nil {
			return issued, clocksDue, err
		}
	}
	s.forget(time.Now(), nil)
	return issued, clocksDue, nil
}

// clockCatchUp is the tick while a test clock has cycles to catch up on.
const clockCatchUp = 100 * time.Millisecond

// Run ticks until ctx ends, as the job every.SubscriptionCycles: at once, then
// every interval. A failed tick is logged and retried at the next one.
func (s *Scheduler) Run(ctx context.Context, interval time.Duration) error {
	log := s.Log
	if log == nil {
		log = slog.Default()
	}
	switch ok, err := s.charges(); {
	case err != nil:
		return err // fail closed, and loudly: the role stops
	case !ok:
		log.Info("subscription scheduler idle: a live server has no card acquirer, so no cycle is charged here")
		return nil
	}
	clocksDue := 0
	return every.Run(ctx, log, every.Job{Name: every.SubscriptionCycles, Interval: interval, AtStart: true,
		Run: func(ctx context.Context) error {
			issued, due, err := s.runOnce(ctx)
			clocksDue = due
			if err == nil && issued > 0 {
				log.Debug("subscription cycles issued", "count", issued)
			}
			return err
		},
		Next: func() time.Duration {
			if clocksDue > 0 && interval > clockCatchUp {
				// An advanced test clock bills its cycles one after another (each is due
				// only once the one before moved the date): look again soon, so a year
				// of monthly cycles takes about a second, not a dozen ticks.
				return clockCatchUp
			}
			return interval
		}})
}
