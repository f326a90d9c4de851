package every

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Job is one periodic job.
type Job struct {
	// Name is the job's, from the catalogue (catalogue.go).
	Name string
	// Interval is how often it runs.
	Interval time.Duration
	// Run is one run. An error is counted and logged with the job's name; the
	// job runs again at its next time either way.
	Run func(ctx context.Context) error
	// AtStart runs the job once as soon as Run is called, before its first
	// interval has passed (a gauge a started instance reports at once).
	AtStart bool
	// Next, when set, gives after each run the wait before the next one, counted
	// from that run's end (a job that sometimes has to look again soon). Without
	// it the job runs on a ticker every Interval, and a run that takes longer
	// than that skips the ticks it missed: the next run starts when it ends.
	Next func() time.Duration
}

// ErrJob: a job Run refuses to start (a name outside the catalogue, no
// interval, no function).
var ErrJob = errors.New("every: invalid job")

var (
	runs = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "paysvc_job_runs_total",
		Help: "Runs of each periodic job (every.Run), ended or failed.",
	}, []string{"name"})
	failures = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "paysvc_job_errors_total",
		Help: "Runs of each periodic job that returned an error (logged with the job's name).",
	}, []string{"name"})
	duration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "paysvc_job_duration_seconds",
		Help:    "How long each run of a periodic job took.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10), // 1 ms to 4.4 min
	}, []string{"name"})
	lastRun = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "paysvc_job_last_run_timestamp_seconds",
		Help: "Unix time the last run of each periodic job ended, whatever its result; 0 before the first.",
	}, []string{"name"})
	lastSuccess = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "paysvc_job_last_success_timestamp_seconds",
		Help: "Unix time the last run of each periodic job without an error ended; 0 before the first.",
	}, []string{"name"})
	interval = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "paysvc_job_interval_seconds",
		Help: "The interval of each periodic job this process runs (its series exist only where the job runs).",
	}, []string{"name"})
)

// Run runs j every j.Interval until ctx ends, then returns nil; it returns
// ErrJob at once for a job it cannot run. Runs of one call never overlap: the
// next waits for the one before. A run's error is counted and logged at warning
// with the job's name, unless ctx ended (the stop, not the job, ended it); a
// panic is not recovered. The job's series are created when Run starts, so its
// panels read 0 before its first run.
func Run(ctx context.Context, log *slog.Logger, j Job) error {
	switch {
	case !known(j.Name):
		return fmt.Errorf("%w: %q is not in the catalogue (actors/values/every/catalogue.go)", ErrJob, j.Name)
	case j.Interval <= 0:
		return fmt.Errorf("%w: %s: interval %v", ErrJob, j.Name, j.Interval)
	case j.Run == nil:
		return fmt.Errorf("%w: %s: no Run", ErrJob, j.Name)
	}
	if log == nil {
		log = slog.Default()
	}
	m := metricsOf(j.Name)
	interval.WithLabelValues(j.Name).Set(j.Interval.Seconds())
	if j.Next != nil {
		return m.loopNext(ctx, log, j)
	}
	// The ticker starts before a run at start, so the runs keep to the times
	// counted from Run's call.
	t := time.NewTicker(j.Interval)
	defer t.Stop()
	if j.AtStart {
		m.run(ctx, log, j)
	}
	return m.loop(ctx, log, j, t.C, func() {})
}

// loopNext waits j.Next() after each run, on a timer.
func (m jobMetrics) loopNext(ctx context.Context, log *slog.Logger, j Job) error {
	wait := j.Interval
	if j.AtStart {
		m.run(ctx, log, j)
		wait = j.Next()
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	return m.loop(ctx, log, j, t.C, func() { t.Reset(j.Next()) })
}

// loop runs j on each tick until ctx ends, calling after once each run is done
// (a timer's loop sets its next wait there).
func (m jobMetrics) loop(ctx context.Context, log *slog.Logger, j Job, tick <-chan time.Time, after func()) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
		}
		if ctx.Err() != nil {
			return nil // a tick that raced the stop
		}
		m.run(ctx, log, j)
		after()
	}
}

// jobMetrics are one job's series, looked up once.
type jobMetrics struct {
	runs, failures    prometheus.Counter
	duration          prometheus.Observer
	lastRun, lastSucc prometheus.Gauge
}

func metricsOf(name string) jobMetrics {
	return jobMetrics{runs: runs.WithLabelValues(name), failures: failures.WithLabelValues(name),
		duration: duration.WithLabelValues(name), lastRun: lastRun.WithLabelValues(name), lastSucc: lastSuccess.WithLabelValues(name)}
}

// run is one run of j, measured.
func (m jobMetrics) run(ctx context.Context, log *slog.Logger, j Job) {
	start := time.Now()
	err := j.Run(ctx)
	end := time.Now()
	m.runs.Inc()
	m.duration.Observe(end.Sub(start).Seconds())
	m.lastRun.Set(unix(end))
	switch {
	case err == nil:
		m.lastSucc.Set(unix(end))
	case ctx.Err() == nil:
		m.failures.Inc()
		log.Warn("periodic job failed", "job", j.Name, "err", err)
	}
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
