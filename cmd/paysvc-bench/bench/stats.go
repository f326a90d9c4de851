package bench

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// latencySummary holds exact percentiles: every duration is kept (8 bytes a request)
// and sorted once, so there is no histogram bucket error to explain away.
type latencySummary struct {
	N                  int
	P50, P95, P99, Max time.Duration
}

func summarize(d []time.Duration) latencySummary {
	if len(d) == 0 {
		return latencySummary{}
	}
	slices.Sort(d)
	return latencySummary{N: len(d), P50: percentile(d, 50), P95: percentile(d, 95), P99: percentile(d, 99), Max: d[len(d)-1]}
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }

func (l latencySummary) String() string {
	if l.N == 0 {
		return "no successful requests"
	}
	return fmt.Sprintf("p50 %s  p95 %s  p99 %s  max %s ms", ms(l.P50), ms(l.P95), ms(l.P99), ms(l.Max))
}

// statusCounts counts requests that did not succeed, by HTTP status ("transport"
// when there was no response at all), with one response body of each for the report.
type statusCounts struct {
	N      map[string]int
	Sample map[string]string
}

func newStatusCounts() statusCounts {
	return statusCounts{N: map[string]int{}, Sample: map[string]string{}}
}

func (s statusCounts) add(key, sample string) {
	s.N[key]++
	if _, ok := s.Sample[key]; !ok {
		if len(sample) > 300 {
			sample = sample[:300] + "..."
		}
		s.Sample[key] = sample
	}
}

func (s statusCounts) merge(o statusCounts) {
	for k, n := range o.N {
		s.N[k] += n
		if _, ok := s.Sample[k]; !ok {
			s.Sample[k] = o.Sample[k]
		}
	}
}

func (s statusCounts) total() int {
	n := 0
	for _, v := range s.N {
		n += v
	}
	return n
}

func (s statusCounts) String() string {
	if len(s.N) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(s.N))
	for k := range s.N {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, s.N[k])
	}
	return strings.Join(parts, ", ")
}

// centsString renders whole cents as the API's two-decimal amount.
func centsString(c int64) string {
	sign := ""
	if c < 0 {
		sign, c = "-", -c
	}
	return fmt.Sprintf("%s%d.%02d", sign, c/100, c%100)
}
