package engine

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var (
	commandsApplied = counterVec("paysvc_engine_commands_applied_total",
		"Commands committed by the engine, by type and outcome (ok, rejected, duplicate).",
		"type", "outcome")
	batchSize = histogram("paysvc_engine_batch_size_commands",
		"Commands per committed batch transaction (one transaction carries every partition's batch of a poll).",
		prometheus.ExponentialBuckets(1, 2, 13))
	batchCommitSeconds = histogram("paysvc_engine_batch_commit_seconds",
		"Time to write and commit one batch transaction.",
		prometheus.ExponentialBuckets(0.0005, 2, 14))
	finalReleased = counter("paysvc_engine_final_invoices_released_total",
		"Aggregate actors stopped as soon as the batch that made their instance final (a COMPLETE or FAILED collection, a finished payment file) committed, rather than after PAYSVC_ENGINE_IDLE_AFTER.")
	batchApplies = counterVec("paysvc_engine_batch_applies_total",
		"Polls applied into a partition's open batch: during_commit (beside the commit in flight) or after_commit (no commit was in flight, or the partition is isolating a failure).",
		"when")
	// The two series, resolved once: every applied poll counts in one.
	appliesDuringCommit = batchApplies.WithLabelValues("during_commit")
	appliesAfterCommit  = batchApplies.WithLabelValues("after_commit")
	batchAppliedCmds    = counterVec("paysvc_engine_batch_applied_commands_total",
		"Commands applied into a partition's open batch, by when (as paysvc_engine_batch_applies_total): the share of the load applied beside a commit, and with the applies, the commands one apply carries. Commands applied again after a failed batch count again.",
		"when")
	cmdsDuringCommit = batchAppliedCmds.WithLabelValues("during_commit")
	cmdsAfterCommit  = batchAppliedCmds.WithLabelValues("after_commit")
	applyRounds      = histogram("paysvc_engine_batch_apply_rounds",
		"Polls applied into one partition's batch before it was sealed for its commit.",
		prometheus.ExponentialBuckets(1, 2, 10))
	memoryReleases = counter("paysvc_engine_memory_releases_total",
		"Times the engine collected the heap and returned its free pages to the kernel because passivation sweeps had dropped 1,000 actors since the last time.")
	commitWait = histogram("paysvc_engine_commit_wait_seconds",
		"How long a batch already being applied when the commit before it ended waited after that end before its own commit started: the database's idle time between the commits of a busy engine.",
		prometheus.ExponentialBuckets(0.00005, 2, 14))
	commitPartitions = histogram("paysvc_engine_commit_partitions",
		"Partitions whose batches one committed transaction carried.",
		prometheus.LinearBuckets(1, 1, 16))
	dedupeIDs = counterVec("paysvc_engine_dedupe_ids_total",
		"Command ids of polled records by how the engine deduplicated them: read (looked up in processed_commands, one query per poll) or fresh (an id minted by the API for the command alone, not looked up: ADR 0006).",
		"lookup")
	dedupeReads = histogram("paysvc_engine_dedupe_read_seconds",
		"Time of the poll's one read of processed_commands (polls of fresh ids only make none).",
		prometheus.ExponentialBuckets(0.0001, 2, 14))
	hydrationReads = histogram("paysvc_engine_hydration_read_seconds",
		"Time of a poll's reads of the aggregates its commands name that no actor holds (one query per kind for all partitions, beside the dedupe read; polls that need none make none).",
		prometheus.ExponentialBuckets(0.0001, 2, 14))
	midRoundSeals = counter("paysvc_engine_seals_during_reads_total",
		"Commits started while the poll being applied still waited for its reads: the commit before had ended then, and the poll's records went into the batch after.")
	commitFallbacks = counter("paysvc_engine_commit_fallbacks_total",
		"Transactions of several partitions' batches that the database refused, then committed partition by partition so that each gets its own outcome.")
	batchFailures = counterVec("paysvc_engine_batch_failures_total",
		"Batches that did not commit, by reason (fenced, stale, error, permanent). Their commands are retried; after a permanent failure in smaller batches.",
		"reason")
	commandE2ESeconds = histogram("paysvc_engine_command_end_to_end_seconds",
		"From the API issuing a command to its batch committing.",
		prometheus.ExponentialBuckets(0.0005, 2, 15))
	consumerLag = gaugeVec("paysvc_engine_consumer_lag_records",
		"Commands in the partition not yet committed by this worker (high watermark minus stored offset).",
		"partition")
	liveActors = gauge("paysvc_engine_live_actors",
		"Aggregate actors currently in memory.")
	ownedPartitions = gauge("paysvc_engine_owned_partitions",
		"Command partitions this engine currently owns.")
	commandsQuarantined = counterVec("paysvc_engine_commands_quarantined_total",
		"Commands set aside because they fail on their own for a reason retrying cannot fix, by type and code (SQLSTATE, panic, encode); each was answered with a refusal.",
		"type", "code")
	isolationSteps = counter("paysvc_engine_isolation_steps_total",
		"Times a permanently failing batch was retried as a smaller batch to find the command that causes it.")
	repliesSent = counterVec("paysvc_engine_replies_total",
		"Replies handed to waiting API instances, by path (local, kafka).",
		"path")
)

// The engine declares its metrics through these, so that each declaration reads
// as its name, its help and its labels or buckets; every metric registers in the
// default registry, which /metrics serves.

func counter(name, help string) prometheus.Counter {
	return promauto.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return promauto.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func gauge(name, help string) prometheus.Gauge {
	return promauto.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return promauto.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

func histogram(name, help string, buckets []float64) prometheus.Histogram {
	return promauto.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
}
