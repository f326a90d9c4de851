package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/jmoiron/sqlx"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/storage"
	"paysvc/topics"
	"paysvc/topics/inproc"
)

// Config is the engine's part of the service configuration.
type Config struct {
	Brokers        []string
	Group          string        // consumer group shared by every engine instance (logical: Namespace prefixes it)
	Owner          string        // this instance's id, recorded with each claimed partition
	MaxPollRecords int           // upper bound of one batch across partitions
	SessionTimeout time.Duration // how soon a dead instance's partitions move
	ActorIdle      time.Duration // idle actors are passivated after this
	ActorTimeout   time.Duration // an actor that does not answer in time fails the batch
	Logger         *slog.Logger
	OnCommit       func() // called after each committed batch (wakes the outbox relay)
	// MerchantRefresh is how long the guards (guard.go) trust what they read of a
	// merchant (its enabled flag) before reading it again: a disabled merchant's
	// commands are refused within this time. Default 1s; negative reads every
	// time (tests).
	MerchantRefresh time.Duration
	// Kinds are the aggregates this engine applies, in order (kind.go): the
	// service's one list (cmd/paysvc/service, Aggregates), or a test's own.
	Kinds []Kind
	// Namespace prefixes the command and replies topics and the group on the
	// cluster (topics.Namespace); the partitions' stored offsets, the
	// quarantine and the outbox keep the logical names.
	Namespace topics.Namespace
}

func (c *Config) defaults() {
	if c.Group == "" {
		c.Group = "paysvc-engine"
	}
	if c.MaxPollRecords <= 0 {
		c.MaxPollRecords = 4000
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 10 * time.Second
	}
	if c.ActorIdle <= 0 {
		c.ActorIdle = 10 * time.Minute
	}
	if c.ActorTimeout <= 0 {
		c.ActorTimeout = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.OnCommit == nil {
		c.OnCommit = func() {}
	}
	if c.MerchantRefresh == 0 {
		c.MerchantRefresh = time.Second
	}
}

// Engine owns command partitions and applies their commands.
type Engine struct {
	cfg    Config
	db     *sqlx.DB
	cl     *kgo.Client
	actors *actor.Engine
	corr   atomic.Uint64
	log    *slog.Logger
	// commands is the command topic's name on the cluster (cfg.Namespace's).
	commands string

	mu    sync.Mutex
	parts map[int32]*partition
	live  atomic.Int64
	// passivated counts the actors sweeps dropped since the last releaseMemory;
	// releasing is set while one runs.
	passivated int64
	releasing  atomic.Bool
	// kinds are the aggregates of Config.Kinds (kind.go), indexed at New.
	kinds registered
	// workers run the partitions' shares of each round; set by Run.
	workers *workers
	// merchants are what the guards read of merchants (guard.go).
	merchants merchantCache
	// joined says the group has given this member an assignment (possibly empty)
	// since it last joined; assigned is that assignment, under mu. Ready compares
	// it with parts, the partitions claimed in Postgres.
	joined   atomic.Bool
	assigned map[int32]bool
	// outOfRange is when each partition's fetch last failed with
	// OFFSET_OUT_OF_RANGE was logged; only Run's loop touches it.
	outOfRange map[int32]time.Time
}

// New connects the engine's Kafka client; Run starts consuming.
func New(cfg Config, db *sqlx.DB) (*Engine, error) {
	cfg.defaults()
	kinds, err := register(cfg.Kinds)
	if err != nil {
		return nil, err
	}
	hw, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		return nil, fmt.Errorf("engine: actor engine: %w", err)
	}
	e := &Engine{cfg: cfg, db: db, actors: hw, parts: map[int32]*partition{}, log: cfg.Logger.With("component", "engine"),
		kinds: kinds, assigned: map[int32]bool{}, outOfRange: map[int32]time.Time{}, commands: cfg.Namespace.Topic(topics.CommandsTopic)}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cfg.Brokers...), kgo.Dialer(inproc.Dial),
		kgo.ConsumerGroup(cfg.Namespace.Group(cfg.Group)),
		kgo.ConsumeTopics(e.commands),
		kgo.DisableAutoCommit(),
		// Never skip commands: a partition whose next stored offset is no longer
		// in the log (retention deleted commands no engine applied, or a broker
		// lost records) stops with OFFSET_OUT_OF_RANGE instead of resuming at the
		// log's start, kgo's default, which would drop them without a word. The
		// restart then refuses and names the gap (cmd/paysvc/service/commandlog.go).
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.HeartbeatInterval(cfg.SessionTimeout/5),
		kgo.OnPartitionsAssigned(e.onJoined),
		kgo.AdjustFetchOffsetsFn(e.onAssigned),
		kgo.OnPartitionsRevoked(e.onRevoked),
		kgo.OnPartitionsLost(e.onLost),
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.ProducerLinger(0), inproc.Compression(cfg.Brokers),
		kgo.ProducerBatchMaxBytes(topics.MaxRecordBytes),
		kgo.FetchMaxPartitionBytes(topics.MaxRecordBytes),
		kgo.ClientID("paysvc-engine-"+cfg.Owner),
	)
	if err != nil {
		return nil, fmt.Errorf("engine: kafka client: %w", err)
	}
	e.cl = cl
	return e, nil
}

// Run consumes until ctx ends, then leaves the group so partitions move at once.
func (e *Engine) Run(ctx context.Context) error {
	defer func() { _ = topics.CloseGroupClient(e.cl) }() // bounded: a member that cannot leave is expired by the group
	defer e.joined.Store(false)                          // leaving: not ready from here on
	lastSweep := time.Now()
	defer e.Stop() // waits for commits in flight, so their replies still go out
	// Enough for every partition of a round at once; more partitions wait for one.
	e.workers = newWorkers(16)
	defer e.workers.stop()
	// Gather while the database works, and apply while gathering. While a commit
	// is in flight the loop keeps polling (so the client keeps fetching) and
	// applies what arrives into each partition's open batch at once; when the
	// commit is done, the open batches are sealed and committed together. So a
	// batch carries everything that arrived during the commit before it (applying
	// each poll as its own batch took the one or two commands that had arrived
	// since the last poll and paid a transaction's fixed cost per handful), and
	// its apply runs beside that commit instead of after it (holding the records
	// until the commit ended put a heavy apply, such as a payment file's rail
	// results, in series with every commit: docs/benchmarks-history.md).
	cs := &commits{e: e, ctx: ctx}
	// held are records not applied yet: those of a poll with no commit in flight
	// (applied at once below), and those of partitions isolating a failure, which
	// take their records as one batch at its end.
	held, gathered := map[int32]*work{}, 0
	var at time.Time // the open batches' time, shared by the commit that carries them
	for {
		var pctx context.Context
		var cancel context.CancelFunc
		stop := func() bool { return false }
		if cs.committing != nil {
			// Until the commit is done, then with whatever was buffered.
			pctx, cancel = context.WithCancel(ctx)
			stop = context.AfterFunc(cs.committing, cancel)
		} else {
			// A bounded poll, so commit outcomes are noticed on idle partitions too.
			pctx, cancel = context.WithTimeout(ctx, 250*time.Millisecond)
		}
		fetches := e.cl.PollRecords(pctx, e.cfg.MaxPollRecords-gathered)
		stop()
		cancel()
		if ctx.Err() != nil || fetches.IsClientClosed() {
			e.cl.AllowRebalance()
			return nil
		}
		e.logFetchErrors(fetches)
		polled, n := polledWork(fetches)
		gathered += n
		if at.IsZero() && len(polled) > 0 {
			// One time for the whole batch: it commits in one transaction, whose rows
			// carry one time (storage.CommitBatches).
			at = batchTime()
		}
		started := false
		if cs.committing != nil {
			if len(polled) > 0 {
				// Apply now, beside the commit; partitions that cannot hand theirs back.
				// The round reads first, without the partitions' locks: if the commit
				// ends meanwhile, the open batches are sealed and committed at once, and
				// the round applies into the batches after them (round). Not while
				// records are held: those of an isolating partition go in first, at
				// the seal below.
				rd := e.startRound(ctx, polled)
				if len(held) == 0 {
					select {
					case <-rd.ready:
					case <-cs.committing.Done():
						cs.committing, at = nil, batchTime()
						if started = cs.start(); started {
							midRoundSeals.Inc()
							gathered = n
						}
					}
				}
				if cs.committing != nil {
					cs.waiting = true
				}
				for part, w := range e.applyRound(ctx, rd, at, cs.committing != nil) {
					h := held[part]
					if h == nil || h.seeks != w.seeks {
						// New, or what was held before was fetched before a seek since.
						held[part] = w
						continue
					}
					h.recs = append(h.recs, w.recs...)
					h.hw = w.hw
				}
			}
			if !started && cs.committing != nil {
				if cs.committing.Err() == nil && gathered < e.cfg.MaxPollRecords {
					continue // still committing: keep gathering (rebalances stay blocked)
				}
				<-cs.committing.Done() // a full batch waits for it too, as its partitions would
				cs.committing = nil
				held = e.current(held)
			}
		} else {
			held = polled
		}
		if !started {
			// No commit in flight: what is held goes in, and everything open commits.
			if len(held) > 0 {
				e.applyRound(ctx, e.startRound(ctx, held), at, false)
			}
			held, gathered, at = map[int32]*work{}, 0, time.Time{}
			cs.start()
		}
		e.settleAll(ctx)
		e.cl.AllowRebalance()
		if time.Since(lastSweep) > e.cfg.ActorIdle/4 {
			e.passivate(ctx, time.Now().Add(-e.cfg.ActorIdle))
			lastSweep = time.Now()
		}
	}
}

// commits is Run's commit in flight: the loop seals and starts one while
// it keeps polling and applying into the next batch.
type commits struct {
	e   *Engine
	ctx context.Context
	// committing is done when the last commit has finished (nil: none started
	// since the loop last waited for one).
	committing context.Context
	// waiting says the next batch had records applied while the commit in flight
	// ran: from that commit's end (committedAt, nanoseconds) the batch waits.
	waiting     bool
	committedAt atomic.Int64
}

// start seals every owned partition's open batch and starts their commit, one
// transaction for all; it says whether there was anything to commit.
func (cs *commits) start() bool {
	var group []*pending
	for _, p := range cs.e.owned() {
		if pd := cs.e.seal(cs.ctx, p); pd != nil {
			group = append(group, pd)
		}
	}
	if len(group) == 0 {
		return false
	}
	if cs.waiting {
		commitWait.Observe(time.Since(time.Unix(0, cs.committedAt.Load())).Seconds())
	}
	cs.waiting = false
	// The commit outlives the poll loop's context: a shutdown lets it finish.
	var done context.CancelFunc
	cs.committing, done = context.WithCancel(context.Background())
	go func() {
		defer done()
		cs.e.commitGroup(context.WithoutCancel(cs.ctx), group)
		cs.committedAt.Store(time.Now().UnixNano())
	}()
	// Let the commit start now. A new goroutine waits for this one to block, and
	// the loop would first poll and apply the next records (and the replies just
	// delivered wake up to 64 handlers that share the other processor): on a
	// busy 2-core machine the commit started 0.4 ms after its seal, a tenth of a
	// transfer cycle (docs/benchmarks-history.md). The loop's next poll can
	// wait that long; the database cannot be given the batch too soon.
	runtime.Gosched()
	return true
}

// logFetchErrors logs a poll's fetch errors: a partition whose next command
// is gone from the log once a minute (the fetch fails the same way until an
// operator acts), any other error as a warning.
func (e *Engine) logFetchErrors(fetches kgo.Fetches) {
	fetches.EachError(func(t string, p int32, err error) {
		switch {
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		case errors.Is(err, kerr.OffsetOutOfRange):
			// The requests of its merchants time out meanwhile.
			if time.Since(e.outOfRange[p]) > time.Minute {
				e.outOfRange[p] = time.Now()
				e.log.Error("partition stopped: its next command is no longer in the log (deleted by retention before "+
					"any engine applied it, or lost by the brokers), and nothing after it is applied. Restart the engine: "+
					"it refuses to start and names the gap", "topic", e.cfg.Namespace.Logical(t), "partition", p, "err", err)
			}
		default:
			e.log.Warn("fetch error", "topic", e.cfg.Namespace.Logical(t), "partition", p, "err", err)
		}
	})
}

// polledWork is a poll's records by partition, and how many there are.
func polledWork(fetches kgo.Fetches) (map[int32]*work, int) {
	polled, n := map[int32]*work{}, 0
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		if len(fp.Records) == 0 {
			return
		}
		w := polled[fp.Partition]
		if w == nil {
			w = &work{}
			polled[fp.Partition] = w
		}
		w.recs = append(w.recs, fp.Records...)
		w.hw = fp.HighWatermark
		n += len(fp.Records)
	})
	return polled, n
}

// batchTime is a new time for the open batches. Postgres keeps microseconds, so
// replies, events and later reads show the same timestamps.
func batchTime() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// work is one partition's records of a poll, or of several.
type work struct {
	recs  []*kgo.Record
	hw    int64 // the partition's high watermark at the last of them
	seeks int64 // held records: the partition's seek count when it handed them back
}

// current keeps the held records of partitions that were not sought back since
// they handed them back. An early apply of a later poll can find the commit in
// flight failed and seek the partition back to its committed offset while older
// records of it are held (an isolating partition holds its records until the
// seal): the consumer brings those again in their place, and applying the held
// copies would take them for a gap in the log and skip the commands between.
func (e *Engine) current(held map[int32]*work) map[int32]*work {
	out := map[int32]*work{}
	for part, w := range held {
		p := e.partition(part)
		if p == nil {
			continue
		}
		p.mu.Lock()
		if !p.dropped && p.seeks == w.seeks {
			out[part] = w
		}
		p.mu.Unlock()
	}
	return out
}

func (e *Engine) partition(id int32) *partition {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.parts[id]
}

// onAssigned claims each newly assigned partition in Postgres (bumping its owner
// epoch) and starts consuming it at the offset stored by the last committed batch.
// Kafka names the topic as the cluster does; Postgres keeps the logical name.
func (e *Engine) onAssigned(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	for topic, parts := range offsets {
		if topic != e.commands {
			continue
		}
		for part := range parts {
			var epoch, next int64
			var err error
			for attempt := 0; attempt < 20; attempt++ {
				if epoch, next, err = storage.ClaimPartition(ctx, e.db, topics.CommandsTopic, part, e.cfg.Owner); err == nil {
					break
				}
				e.log.Warn("claim partition failed, retrying", "partition", part, "err", err)
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(250 * time.Millisecond):
				}
			}
			if err != nil {
				return nil, err
			}
			p := newPartition(part, epoch, next)
			e.mu.Lock()
			if old := e.parts[part]; old != nil {
				e.dropPartitionLocked(old)
			}
			e.parts[part] = p
			ownedPartitions.Set(float64(len(e.parts)))
			e.mu.Unlock()
			parts[part] = kgo.NewOffset().At(next).WithEpoch(-1)
			consumerLag.WithLabelValues(strconv.Itoa(int(part))).Set(0) // present from assignment, not from the first commit
			e.log.Info("partition assigned", "partition", part, "epoch", epoch, "resume_offset", next)
		}
	}
	return offsets, nil
}

// onJoined records an assignment of the group: the client calls it after every
// join, even when nothing new is assigned, so an engine that owns no partition
// (more engines than partitions) is known to be in the group all the same.
func (e *Engine) onJoined(_ context.Context, _ *kgo.Client, added map[string][]int32) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, part := range added[e.commands] {
		e.assigned[part] = true
	}
	e.joined.Store(true)
}

// onLost is a revocation the member did not choose (its session expired, the
// group fenced it): it is out of the group until it joins again.
func (e *Engine) onLost(ctx context.Context, cl *kgo.Client, lost map[string][]int32) {
	e.joined.Store(false)
	e.onRevoked(ctx, cl, lost)
}

// Readiness is what an engine says about its work to /readyz.
type Readiness struct {
	Ready bool
	// Owned are the partitions claimed in Postgres; Assigned those the group gave.
	Owned, Assigned int
	// Reason is a short word when not ready: "joining" (no assignment from the
	// group yet) or "claiming" (assigned partitions not yet claimed).
	Reason string
}

// Readiness says whether the engine is in its consumer group and owns every
// partition the group assigned it. One still joining, or still claiming its
// partitions in Postgres, applies nothing yet.
func (e *Engine) Readiness() Readiness {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := Readiness{Owned: len(e.parts), Assigned: len(e.assigned)}
	switch {
	case !e.joined.Load():
		r.Reason = "joining"
	default:
		for part := range e.assigned {
			if e.parts[part] == nil {
				r.Reason = "claiming"
				return r
			}
		}
		r.Ready = true
	}
	return r
}

func (e *Engine) onRevoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, part := range revoked[e.commands] {
		delete(e.assigned, part)
		if p := e.parts[part]; p != nil {
			e.dropPartitionLocked(p)
			delete(e.parts, part)
			consumerLag.DeleteLabelValues(strconv.Itoa(int(part)))
			e.log.Info("partition revoked", "partition", part)
		}
	}
	ownedPartitions.Set(float64(len(e.parts)))
}

// dropPartitionLocked forgets a partition's actors. It waits for a batch in
// progress on the partition to finish (its commit is fenced if another worker has
// claimed the partition meanwhile).
func (e *Engine) dropPartitionLocked(p *partition) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inflight != nil {
		<-p.inflight.done // its replies go out if it committed; if not, the next owner applies it
		p.inflight = nil
	}
	p.dropped = true
	p.open = nil
	clear(p.uncommitted)
	clear(p.recent)
	e.resetActors(p)
}

// owned lists the partitions owned now; callers lock each one themselves.
func (e *Engine) owned() []*partition {
	e.mu.Lock()
	defer e.mu.Unlock()
	parts := make([]*partition, 0, len(e.parts))
	for _, p := range e.parts {
		parts = append(parts, p)
	}
	return parts
}

// settleAll notices commits that finished, failed ones especially, on partitions
// that received nothing this poll (a failed commit is otherwise only seen when the
// next batch arrives).
func (e *Engine) settleAll(ctx context.Context) {
	parts := e.owned()
	for _, p := range parts {
		p.mu.Lock()
		if !p.dropped {
			e.settle(ctx, p, false)
		}
		p.mu.Unlock()
	}
}

// releaseAfterPassivating is how many actors the sweeps must have dropped before
// their memory is handed back to the kernel at once (releaseMemory).
const releaseAfterPassivating = 1000

// releaseMemory collects the heap and returns its free pages to the kernel, in the
// background, once sweeps dropped many actors. Left to the runtime, the dropped
// actors' memory stays in the process until the next GC cycle, which an idle
// service may not start for minutes, and its pages go back to the kernel only
// gradually: RSS stayed at the busy high-water mark with no actor live
// (docs/benchmarks-history.md, "Memory at scale"). One sweep runs every quarter of
// PAYSVC_ENGINE_IDLE_AFTER at most, and one release at a time.
func (e *Engine) releaseMemory(dropped int64) {
	if !e.releasing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer e.releasing.Store(false)
		start := time.Now()
		debug.FreeOSMemory()
		memoryReleases.Inc()
		e.log.Debug("memory released after passivation", "actors_dropped", dropped, "took", time.Since(start))
	}()
}

// LiveActors is the number of aggregate instances (actors, of every kind) this
// engine holds in memory now.
func (e *Engine) LiveActors() int64 { return e.live.Load() }

// Stop poisons every actor; the Kafka client is closed when Run returns.
func (e *Engine) Stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range e.parts {
		e.dropPartitionLocked(p)
	}
}
