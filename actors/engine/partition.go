package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/replies"
	"paysvc/actors/wallet"
	"paysvc/storage"
	"paysvc/topics"
)

// errActorTimeout fails the batch: an actor that does not answer cannot be trusted
// to hold the state the batch would commit.
var errActorTimeout = errors.New("engine: actor did not answer in time")

// partition is the worker state of one owned command partition.
type partition struct {
	mu       sync.Mutex
	id       int32
	epoch    int64
	next     int64 // offset of the next command to apply (= stored offset)
	seekedTo int64 // offset last sought to after a gap, -1 if none
	dropped  bool
	gen      int // bumps on every reset so new actors get fresh hollywood ids
	wallets  map[string]*walletRef
	replyCh  chan wallet.Response
}

type walletRef struct {
	pid      *actor.PID
	lastUsed time.Time
}

func newPartition(id int32, epoch, next int64) *partition {
	return &partition{id: id, epoch: epoch, next: next, seekedTo: -1,
		wallets: map[string]*walletRef{}, replyCh: make(chan wallet.Response, 16)}
}

// resetActors throws away the partition's actors; they rehydrate from Postgres on
// next use. Called with p.mu held.
func (e *Engine) resetActors(p *partition) {
	for id, ref := range p.wallets {
		e.actors.Poison(ref.pid)
		delete(p.wallets, id)
		e.live.Add(-1)
	}
	p.gen++
	liveActors.Set(float64(e.live.Load()))
}

// spawn starts a wallet actor hydrated from s.
func (e *Engine) spawn(p *partition, s wallet.State) *walletRef {
	id := fmt.Sprintf("%s.p%d.e%d.g%d", s.WalletID, p.id, p.epoch, p.gen)
	ref := &walletRef{pid: e.actors.Spawn(wallet.Producer(s), "wallet", actor.WithID(id), actor.WithInboxSize(16)), lastUsed: time.Now()}
	p.wallets[s.WalletID] = ref
	e.live.Add(1)
	liveActors.Set(float64(e.live.Load()))
	return ref
}

// ask sends one message to an actor and waits for the answer with our correlation id.
// At most one message per actor is ever in flight, so mailboxes stay bounded.
func (e *Engine) ask(p *partition, ref *walletRef, build func(corr uint64, reply chan<- wallet.Response) any) (wallet.Response, error) {
	corr := e.corr.Add(1)
	ref.lastUsed = time.Now()
	e.actors.Send(ref.pid, build(corr, p.replyCh))
	timer := time.NewTimer(e.cfg.ActorTimeout)
	defer timer.Stop()
	for {
		select {
		case r := <-p.replyCh:
			if r.CorrID != corr {
				continue // a late answer to an earlier, abandoned ask
			}
			return r, nil
		case <-timer.C:
			return wallet.Response{}, errActorTimeout
		}
	}
}

// process applies one poll's records of the partition, retrying the batch on
// transient failures. Records below the stored offset were applied already.
func (e *Engine) process(ctx context.Context, p *partition, recs []*kgo.Record, hw int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dropped {
		return
	}
	todo := recs[:0:0]
	for _, r := range recs {
		if r.Offset >= p.next {
			todo = append(todo, r)
		}
	}
	if len(todo) == 0 {
		return
	}
	if todo[0].Offset > p.next {
		if p.seekedTo != p.next {
			// Records we did not commit were skipped (a failed batch): go back.
			e.seek(p)
			return
		}
		// We went back and the log still starts later: records were removed by
		// retention. Nothing can be done but to say so loudly and go on.
		e.log.Error("command log gap: records below the first available offset are gone",
			"partition", p.id, "stored_offset", p.next, "first_available", todo[0].Offset)
	}
	backoff := 50 * time.Millisecond
	for attempt := 0; attempt < 8; attempt++ {
		err := e.runBatch(ctx, p, todo)
		if err == nil {
			p.seekedTo = -1
			consumerLag.WithLabelValues(strconv.Itoa(int(p.id))).Set(float64(max(hw-p.next, 0)))
			return
		}
		e.resetActors(p)
		switch {
		case errors.Is(err, storage.ErrFenced):
			batchFailures.WithLabelValues("fenced").Inc()
			e.log.Warn("batch fenced: partition now owned elsewhere", "partition", p.id, "epoch", p.epoch)
			p.dropped = true
			return
		case errors.Is(err, storage.ErrStaleSnapshot):
			batchFailures.WithLabelValues("stale").Inc()
		default:
			batchFailures.WithLabelValues("error").Inc()
		}
		e.log.Warn("batch failed, retrying", "partition", p.id, "attempt", attempt+1, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
	e.seek(p) // give the rebalance a chance; the next poll starts over from p.next
}

func (e *Engine) seek(p *partition) {
	p.seekedTo = p.next
	e.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{
		topics.CommandsTopic: {p.id: {Epoch: -1, Offset: p.next}},
	})
}

// deliver hands committed replies to their waiters.
func (e *Engine) deliver(ctx context.Context, out []outgoing) {
	for _, o := range out {
		if o.replyTo == "" {
			continue
		}
		if hub := replies.Local(o.replyTo); hub != nil {
			hub.Deliver(o.reply)
			repliesSent.WithLabelValues("local").Inc()
			continue
		}
		b, err := topics.EncodeReply(o.reply)
		if err != nil {
			continue
		}
		e.cl.Produce(ctx, &kgo.Record{Topic: topics.RepliesTopic, Key: []byte(o.replyTo), Value: b}, func(_ *kgo.Record, err error) {
			if err != nil {
				// The API falls back to the stored reply when its wait times out.
				e.log.Warn("reply produce failed", "err", err)
			}
		})
		repliesSent.WithLabelValues("kafka").Inc()
	}
}

type outgoing struct {
	replyTo string
	reply   topics.Reply
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("engine: marshal %T: %v", v, err)) // only our own types reach here
	}
	return b
}
