package engine

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var (
	commandsApplied = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "paysvc_engine_commands_applied_total",
		Help: "Commands committed by the engine, by type and outcome (ok, rejected, duplicate).",
	}, []string{"type", "outcome"})
	batchSize = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "paysvc_engine_batch_size_commands",
		Help:    "Commands per committed batch transaction (one transaction carries every partition's batch of a poll).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 13),
	})
	batchCommitSeconds = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "paysvc_engine_batch_commit_seconds",
		Help:    "Time to write and commit one batch transaction.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
	})
	finalReleased = promauto.NewCounter(prometheus.CounterOpts{
		Name: "paysvc_engine_final_invoices_released_total",
		Help: "Aggregate actors stopped as soon as the batch that made their instance final (a COMPLETE or FAILED collection, a finished payment file) committed, rather than after PAYSVC_ENGINE_IDLE_AFTER.",
	})
	batchApplies = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "paysvc_engine_batch_applies_total",
		Help: "Polls applied into a partition's open batch: during_commit (beside the commit in flight) or after_commit (no commit was in flight, or the partition is isolating a failure).",
	}, []string{"when"})
	// The two series, resolved once: every applied poll counts in one.
	appliesDuringCommit = batchApplies.WithLabelValues("during_commit")
	appliesAfterCommit  = batchApplies.WithLabelValues("after_commit")
	batchAppliedCmds    = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "paysvc_engine_batch_applied_commands_total",
		Help: "Commands applied into a partition's open batch, by when (as paysvc_engine_batch_applies_total): the share of the load applied beside a commit, and with the applies, the commands one apply carries. Commands applied again after a failed batch count again.",
	}, []string{"when"})
	cmdsDuringCommit = batchAppliedCmds.WithLabelValues("during_commit")
	cmdsAfterCommit  = batchAppliedCmds.WithLabelValues("after_commit")
	applyRounds      = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "paysvc_engine_batch_apply_rounds",
		Help:    "Polls applied into one partition's batch before it was sealed for its commit.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 10),
	})
	memoryReleases = promauto.NewCounter(prometheus.CounterOpts{
		Name: "paysvc_engine_memory_releases_total",
		Help: "Times the engine collected the heap and returned its free pages to the kernel because passivation sweeps had dropped 1,000 actors since the last time.",
	})
	commitWait = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "paysvc_engine_commit_wait_seconds",
		Help:    "How long a batch already being applied when the commit before it ended waited after that end before its own commit started: the database's idle time between the commits of a busy engine.",
		Buckets: prometheus.ExponentialBuckets(0.00005, 2, 14),
	})
	commitPartitions = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "paysvc_engine_commit_partitions",
		Help:    "Partitions whose batches one committed transaction carried.",
		Buckets: prometheus.LinearBuckets(1, 1, 16),
	})
	dedupeIDs = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "paysvc_engine_dedupe_ids_total",
		Help: "Command ids of polled records by how the engine deduplicated them: read (looked up in processed_commands, one query per poll) or fresh (an id minted by the API for the command alone, not looked up: ADR 0006).",
	}, []string{"lookup"})
	dedupeReads = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "paysvc_engine_dedupe_read_seconds",
		Help:    "Time of the poll's one read of processed_commands (polls of fresh ids only make none).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 14),
	})
	hydrationReads = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "paysvc_engine_hydration_read_seconds",
		Help:    "Time of a poll's reads of the aggregates its commands name that no actor holds (one query per kind for all partitions, beside the dedupe read; polls that need none make none).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 14),
	})
	midRoundSeals = promauto.NewCounter(prometheus.CounterOpts{
		Name: "paysvc_engine_seals_during_reads_total",
		Help: "Commits started while the poll being applied still waited for its reads: the commit before had ended then, and the poll's records went into the batch after.",
	})
	commitFallbacks = promauto.NewCounter(prometheus.CounterOpts{
		Name: "paysvc_engine_commit_fallbacks_total",
		Help: "Transactions of several partitions' batches that the database refused, then committed partition by partition so that each gets its own outcome.",
	})
	batchFailures = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "paysvc_engine_batch_failures_total",
		Help: "Batches that did not commit, by reason (fenced, stale, error, permanent). Their commands are retried; after a permanent failure in smaller batches.",
	}, []string{"reason"})
	commandE2ESeconds = promauto.NewHistogram(prometheus.HistogramOpts{
		Name:    "paysvc_engine_command_end_to_end_seconds",
		Help:    "From the API issuing a command to its batch committing.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 15),
	})
	consumerLag = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "paysvc_engine_consumer_lag_records",
		Help: "Commands in the partition not yet committed by this worker (high watermark minus stored offset).",
	}, []string{"partition"})
	liveActors = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "paysvc_engine_live_actors",
		Help: "Aggregate actors currently in memory.",
	})
	ownedPartitions = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "paysvc_engine_owned_partitions",
		Help: "Command partitions this engine currently owns.",
	})
	commandsQuarantined = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "paysvc_engine_commands_quarantined_total",
		Help: "Commands set aside because they fail on their own for a reason retrying cannot fix, by type and code (SQLSTATE, panic, encode); each was answered with a refusal.",
	}, []string{"type", "code"})
	isolationSteps = promauto.NewCounter(prometheus.CounterOpts{
		Name: "paysvc_engine_isolation_steps_total",
		Help: "Times a permanently failing batch was retried as a smaller batch to find the command that causes it.",
	})
	repliesSent = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "paysvc_engine_replies_total",
		Help: "Replies handed to waiting API instances, by path (local, kafka).",
	}, []string{"path"})
)
