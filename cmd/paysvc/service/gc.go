package service

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"paysvc/actors/values/every"
)

// TuneGC sets serve's collector, unless the operator set GOGC (then GOGC and
// GOMEMLIMIT are the runtime's as usual). The profiled service of `paysvc-bench
// --server-cpuprofile` runs with it too, so that its profile shows the collection
// serve does.
//
// The live heap is small (snapshots, in-flight requests) next to what commands
// allocate, so collecting rarely costs little memory and saves CPU that the commit
// path needs on a busy machine: the default GOGC=100 spent a fifth of the service's
// CPU on collection under load, and 1000 gave 4-8% more transfers/s than the 300
// used before (docs/benchmarks-history.md). At 1000 the heap may grow to 11
// times the live heap; a soft memory limit caps that at memoryLimit(live): 448 MiB
// while the live heap is under 112 MiB, else 4 times the live heap, which is
// GOGC=300 again. The limit follows the live heap (governGC), so a large active set
// (hundreds of thousands of live actors) never pins the heap at a fixed limit,
// where the collector would run back to back.
func TuneGC() {
	if os.Getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(1000)
	if os.Getenv("GOMEMLIMIT") != "" {
		return // the operator's limit, as it is
	}
	debug.SetMemoryLimit(memoryLimit(0))
	go governGC(time.Second)
}

// memoryFloor is the soft memory limit while the live heap is small: under the
// issue's 512 MiB budget for a million wallets with 10,000 active (measured peaks
// 414-431 MiB), and several times what a busy engine keeps live.
const memoryFloor = 448 << 20

// memoryLimit is the soft memory limit for a live heap of live bytes.
func memoryLimit(live uint64) int64 {
	return max(memoryFloor, 4*int64(min(live, 1<<60)))
}

// governGC moves the memory limit with the live heap, every interval, for the
// life of the process (the job every.GCMemoryLimit).
func governGC(interval time.Duration) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	_ = every.Run(context.Background(), slog.Default(), every.Job{Name: every.GCMemoryLimit, Interval: interval, Run: func(context.Context) error {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			debug.SetMemoryLimit(memoryLimit(sample[0].Value.Uint64()))
		}
		return nil
	}}) // a catalogued job with an interval: it runs until the process ends
}
